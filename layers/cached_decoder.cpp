#include "attograd/layers/cached_decoder.h"

#include <stdexcept>
#include <string>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"
#include "attograd/layers/cached_attention.h"
#include "attograd/layers/decoding_support.h"

namespace ag {

namespace {

using decoding::require_no_grad;
using decoding::split_heads;

void check_cache_fits(const char* op, const MultiHeadAttention& attn, const KvCache& cache, int64_t B, DType dtype) {
  const MultiHeadAttentionOptions& o = attn.options();
  const KvCacheOptions& c = cache.options();
  if (c.batch != B || c.n_head != o.n_head || c.d_k != o.d_k || c.d_v != o.d_v || c.dtype != dtype) {
    throw std::invalid_argument(std::string(op) + ": the cache holds (B=" + std::to_string(c.batch) +
                                ", H=" + std::to_string(c.n_head) + ", T, d_k=" + std::to_string(c.d_k) +
                                " / d_v=" + std::to_string(c.d_v) + ") in " + dtype_name(c.dtype) + " but the input (B=" +
                                std::to_string(B) + ", " + dtype_name(dtype) + ") goes through attention with H=" +
                                std::to_string(o.n_head) + " d_k=" + std::to_string(o.d_k) +
                                " d_v=" + std::to_string(o.d_v));
  }
}

}  // namespace

void append_memory(MultiHeadAttention& attn, const Variable& memory, KvCache& cache, int64_t layer) {
  require_no_grad("append_memory");
  const MultiHeadAttentionOptions& o = attn.options();
  if (memory.dim() != 3 || memory.shape()[2] != o.k_dim || o.k_dim != o.v_dim) {
    throw std::invalid_argument("append_memory: memory of shape " + memory.shape().str() + " must be (B, S, k_dim=" +
                                std::to_string(o.k_dim) + ") and the attention's k_dim and v_dim equal (v_dim=" +
                                std::to_string(o.v_dim) + ")");
  }
  check_cache_fits("append_memory", attn, cache, memory.shape()[0], memory.dtype());
  // A view of (B, S, H*d) would do, but append copies it into the cache anyway.
  cache.append(layer, split_heads(attn.w_k()(memory), o.n_head, o.d_k).value(),
               split_heads(attn.w_v()(memory), o.n_head, o.d_v).value());
}

Variable cached_cross_attention(MultiHeadAttention& attn, const Variable& x, const KvCache& memory_kv, int64_t layer,
                                const AttentionMask& memory_mask) {
  require_no_grad("cached_cross_attention");
  const MultiHeadAttentionOptions& o = attn.options();
  if (x.dim() != 3 || x.shape()[2] != o.q_dim || x.shape()[1] < 1) {
    throw std::invalid_argument("cached_cross_attention: x of shape " + x.shape().str() + " must be (B, T_new >= 1, q_dim=" +
                                std::to_string(o.q_dim) + ")");
  }
  const int64_t B = x.shape()[0], t_new = x.shape()[1];
  check_cache_fits("cached_cross_attention", attn, memory_kv, B, x.dtype());
  const Variable keys(memory_kv.keys(layer));      // (B, H, S, d_k)
  const Variable values(memory_kv.values(layer));  // (B, H, S, d_v)
  if (keys.shape()[2] < 1) {
    throw std::invalid_argument("cached_cross_attention: layer " + std::to_string(layer) +
                                " of the memory cache is empty; append_memory first");
  }
  memory_mask.check("cached_cross_attention", B, o.n_head, t_new, keys.shape()[2]);
  const Variable q = split_heads(attn.w_q()(x), o.n_head, o.d_k);  // (B, H, T_new, d_k)
  const AttentionOutput r = attn.attention()(q, keys, values, memory_mask);
  Variable out = attn.w_o()(reshape(permute(r.output, {0, 2, 1, 3}), {B, t_new, o.n_head * o.d_v}));
  // As MultiHeadAttention::forward: a query that sees no key gets nothing, not w_o's bias.
  const Tensor rows = memory_mask.rows_with_keys();  // (b, 1, q, 1)
  if (rows.defined()) out = out * Variable(rows.reshape({rows.shape()[0], rows.shape()[2], 1}).to(out.dtype()));
  return out;
}

Variable cached_decoder_layer_forward(TransformerDecoderLayer& layer, const Variable& x, KvCache& self_kv,
                                      const KvCache& memory_kv, int64_t index, const AttentionMask& memory_mask) {
  require_no_grad("cached_decoder_layer_forward");
  const TransformerBlockOptions& o = layer.options().block;
  if (x.dim() != 3 || x.shape()[-1] != o.d_model) {
    throw std::invalid_argument("cached_decoder_layer_forward: x of shape " + x.shape().str() +
                                " must be (B, T_new, d_model=" + std::to_string(o.d_model) + ")");
  }
  // dropout1..3 apply o.dropout in training: the functional dropout with the layer's mode is
  // the same operation (the identity in eval).
  const bool training = layer.is_training();
  const auto drop = [&](const Variable& branch) { return dropout(branch, o.dropout, training); };
  const auto self = [&](const Variable& v) { return cached_self_attention(layer.self_attn(), v, self_kv, index); };
  const auto cross = [&](const Variable& v) {
    return cached_cross_attention(layer.multihead_attn(), v, memory_kv, index, memory_mask);
  };
  if (o.norm_first) {
    const Variable h = x + drop(self(layer.norm1()(x)));
    const Variable c = h + drop(cross(layer.norm2()(h)));
    return c + drop(layer.ff()(layer.norm3()(c)));
  }
  const Variable h = layer.norm1()(x + drop(self(x)));
  const Variable c = layer.norm2()(h + drop(cross(h)));
  return layer.norm3()(c + drop(layer.ff()(c)));
}

}  // namespace ag
