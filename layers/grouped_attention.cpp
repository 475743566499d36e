#include "attograd/layers/grouped_attention.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"

namespace ag {

namespace {

GroupedQueryAttentionOptions resolved(GroupedQueryAttentionOptions o) {
  if (o.n_kv_head == 0) o.n_kv_head = o.n_head;
  if (o.head_dim == 0 && o.n_head > 0 && o.d_model % o.n_head == 0) o.head_dim = o.d_model / o.n_head;
  o.rotary.head_dim = o.head_dim;
  const bool ok = o.d_model > 0 && o.n_head > 0 && o.n_kv_head > 0 && o.n_head % o.n_kv_head == 0 && o.head_dim > 0 &&
                  o.head_dim % 2 == 0 && o.norm_eps > 0.0 && o.dropout >= 0.0 && o.dropout <= 1.0;
  if (!ok) {
    std::ostringstream os;
    os << "GroupedQueryAttention: needs d_model > 0, n_head > 0 divisible by n_kv_head > 0, an even head_dim "
          "(given, or d_model / n_head), norm_eps > 0 and dropout in [0, 1]; got d_model="
       << o.d_model << " n_head=" << o.n_head << " n_kv_head=" << o.n_kv_head << " head_dim=" << o.head_dim
       << " norm_eps=" << o.norm_eps << " dropout=" << o.dropout;
    throw std::invalid_argument(os.str());
  }
  return o;
}

std::unique_ptr<Linear> projection(int64_t in, int64_t out, bool bias) {
  return std::make_unique<Linear>(LinearOptions{in, out, bias});
}

}  // namespace

GroupedQueryAttention::GroupedQueryAttention(const GroupedQueryAttentionOptions& options)
    : options_(resolved(options)),
      q_proj_(register_replaceable("q_proj", projection(options_.d_model, options_.n_head * options_.head_dim,
                                                        options_.qkv_bias))),
      k_proj_(register_replaceable("k_proj", projection(options_.d_model, options_.n_kv_head * options_.head_dim,
                                                        options_.qkv_bias))),
      v_proj_(register_replaceable("v_proj", projection(options_.d_model, options_.n_kv_head * options_.head_dim,
                                                        options_.qkv_bias))),
      o_proj_(register_replaceable("o_proj", projection(options_.n_head * options_.head_dim, options_.d_model,
                                                        options_.o_bias))),
      rotary_(register_module("rotary", std::make_unique<RotaryEmbedding>(options_.rotary))) {
  if (options_.qk_norm) {
    q_norm_ = &register_module("q_norm", std::make_unique<RMSNorm>(options_.head_dim, options_.norm_eps));
    k_norm_ = &register_module("k_norm", std::make_unique<RMSNorm>(options_.head_dim, options_.norm_eps));
  }
}

std::string GroupedQueryAttention::name() const {
  std::ostringstream os;
  os << "GroupedQueryAttention(heads=" << options_.n_head << ", kv_heads=" << options_.n_kv_head << ")";
  return os.str();
}

int64_t GroupedQueryAttention::cached_positions(const KvCacheLayer& cache, const Variable& x) const {
  if (grad_enabled()) {
    throw std::logic_error("GroupedQueryAttention: decoding through a KvCache (cache.layer(" +
                           std::to_string(cache.index) + ")) builds no graph; run it under a NoGradGuard");
  }
  if (cache.use != KvCacheUse::append) {
    throw std::invalid_argument("GroupedQueryAttention: is self-attention; pass cache.layer(i), not a memory layer");
  }
  const KvCacheOptions& c = cache.cache->options();
  const GroupedQueryAttentionOptions& o = options_;
  const int64_t B = x.shape()[0], T = x.shape()[1];
  if (c.batch != B || c.n_head != o.n_kv_head || c.d_k != o.head_dim || c.d_v != o.head_dim ||
      c.dtype != x.dtype()) {
    throw std::invalid_argument("GroupedQueryAttention: the cache holds (B=" + std::to_string(c.batch) + ", H=" +
                                std::to_string(c.n_head) + ", T, d=" + std::to_string(c.d_k) + ") in " +
                                dtype_name(c.dtype) + " but x " + x.shape().str() + " (" + dtype_name(x.dtype()) +
                                ") needs H=n_kv_head=" + std::to_string(o.n_kv_head) + " d=head_dim=" +
                                std::to_string(o.head_dim));
  }
  const int64_t past = cache.cache->length(cache.index);
  if (past + T > c.max_len) {
    throw std::invalid_argument("GroupedQueryAttention: layer " + std::to_string(cache.index) + " of the cache holds " +
                                std::to_string(past) + " positions; " + std::to_string(T) +
                                " more exceed max_len=" + std::to_string(c.max_len));
  }
  return past;
}

Variable GroupedQueryAttention::forward(const Variable& x, const AttentionMask& mask, const KvCacheLayer& cache) {
  const GroupedQueryAttentionOptions& o = options_;
  if (x.dim() != 3 || x.shape()[2] != o.d_model) {
    throw std::invalid_argument("GroupedQueryAttention: expected x (B, T, d_model=" + std::to_string(o.d_model) +
                                "), got " + x.shape().str());
  }
  const int64_t B = x.shape()[0], T = x.shape()[1], D = o.head_dim;
  const int64_t past = cache.empty() ? 0 : cached_positions(cache, x);
  mask.check("GroupedQueryAttention", B, o.n_head, T, past + T);

  // (B, T, heads, D), each head normalised (Qwen3) and turned to its position.
  const auto heads = [&](Linear& proj, RMSNorm* norm, int64_t n) {
    Variable h = reshape(proj.forward(x), {B, T, n, D});
    if (norm) h = norm->forward(h);
    return h;
  };
  const Variable q = rotary_(heads(*q_proj_, q_norm_, o.n_head), past);
  const Variable k_new = rotary_(heads(*k_proj_, k_norm_, o.n_kv_head), past);
  const Variable v_new = heads(*v_proj_, nullptr, o.n_kv_head);
  // (B, heads, T, D) views; with a cache, the keys and values of every position so far.
  Variable k = permute(k_new, {0, 2, 1, 3}), v = permute(v_new, {0, 2, 1, 3});
  if (!cache.empty()) {
    cache.cache->append(cache.index, k.value(), v.value());
    k = Variable(cache.cache->keys(cache.index));
    v = Variable(cache.cache->values(cache.index));
  }
  AttentionOptions op;
  op.dropout = o.dropout;
  op.training = is_training();
  const Variable attended = scaled_dot_product_attention(permute(q, {0, 2, 1, 3}), k, v, mask, Variable(), op).output;
  // (B, H, T, D) -> (B, T, H * D): heads side by side, as o_proj expects them.
  Variable out = o_proj_->forward(reshape(permute(attended, {0, 2, 1, 3}), {B, T, o.n_head * D}));
  const Tensor rows = mask.rows_with_keys();  // (b, 1, q, 1): a query that sees nothing gets nothing
  if (rows.defined()) out = out * Variable(rows.reshape({rows.shape()[0], rows.shape()[2], 1}).to(out.dtype()));
  return out;
}

}  // namespace ag
