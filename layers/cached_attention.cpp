#include "attograd/layers/cached_attention.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"
#include "attograd/layers/decoding_support.h"

namespace ag {

namespace {

using decoding::require_no_grad;
using decoding::split_heads;

// Query i of the new positions sits at absolute position past + i and sees keys 0 .. past + i:
// keep (1, 1, T_new, past + T_new). A single new position sees every cached key: no mask.
AttentionMask causal_after(int64_t past, int64_t t_new) {
  if (t_new == 1) return AttentionMask();
  const int64_t total = past + t_new;
  std::vector<double> keep(static_cast<size_t>(t_new * total), 0.0);
  for (int64_t i = 0; i < t_new; ++i) {
    for (int64_t j = 0; j <= past + i; ++j) keep[static_cast<size_t>(i * total + j)] = 1.0;
  }
  return AttentionMask::keep(from_vector(keep, {1, 1, t_new, total}));
}

}  // namespace

Variable cached_self_attention(MultiHeadAttention& attn, const Variable& x, KvCache& cache, int64_t layer) {
  require_no_grad("cached_self_attention");
  const MultiHeadAttentionOptions& o = attn.options();
  if (o.q_dim != o.d_model || o.k_dim != o.d_model || o.v_dim != o.d_model) {
    throw std::invalid_argument("cached_self_attention: needs self-attention sizes (q_dim = k_dim = v_dim = d_model=" +
                                std::to_string(o.d_model) + "), got q_dim=" + std::to_string(o.q_dim) +
                                " k_dim=" + std::to_string(o.k_dim) + " v_dim=" + std::to_string(o.v_dim));
  }
  if (x.dim() != 3 || x.shape()[2] != o.d_model || x.shape()[1] < 1) {
    throw std::invalid_argument("cached_self_attention: x of shape " + x.shape().str() +
                                " must be (B, T_new >= 1, d_model=" + std::to_string(o.d_model) + ")");
  }
  const KvCacheOptions& c = cache.options();
  const int64_t B = x.shape()[0], t_new = x.shape()[1];
  if (c.batch != B || c.n_head != o.n_head || c.d_k != o.d_k || c.d_v != o.d_v || c.dtype != x.dtype()) {
    throw std::invalid_argument(
        "cached_self_attention: the cache holds (B=" + std::to_string(c.batch) + ", H=" + std::to_string(c.n_head) +
        ", T, d_k=" + std::to_string(c.d_k) + " / d_v=" + std::to_string(c.d_v) + ") in " + dtype_name(c.dtype) +
        " but x " + x.shape().str() + " (" + dtype_name(x.dtype()) + ") goes through attention with H=" +
        std::to_string(o.n_head) + " d_k=" + std::to_string(o.d_k) + " d_v=" + std::to_string(o.d_v));
  }
  const int64_t past = cache.length(layer);  // names a layer outside the cache
  if (past + t_new > cache.max_len()) {
    throw std::invalid_argument("cached_self_attention: layer " + std::to_string(layer) + " holds " +
                                std::to_string(past) + " positions; " + std::to_string(t_new) +
                                " more (x=" + x.shape().str() + ") exceed max_len=" + std::to_string(cache.max_len()));
  }

  const Variable q = split_heads(attn.w_q()(x), o.n_head, o.d_k);  // (B, H, T_new, d_k)
  const Variable k = split_heads(attn.w_k()(x), o.n_head, o.d_k);  // (B, H, T_new, d_k)
  const Variable v = split_heads(attn.w_v()(x), o.n_head, o.d_v);  // (B, H, T_new, d_v)
  cache.append(layer, k.value(), v.value());
  const Variable keys(cache.keys(layer));      // (B, H, past + T_new, d_k), a view of the cache
  const Variable values(cache.values(layer));  // (B, H, past + T_new, d_v)
  const AttentionOutput r = attn.attention()(q, keys, values, causal_after(past, t_new));
  // (B, H, T_new, d_v) -> (B, T_new, H * d_v), heads side by side as w_o expects them.
  return attn.w_o()(reshape(permute(r.output, {0, 2, 1, 3}), {B, t_new, o.n_head * o.d_v}));
}

Variable cached_block_forward(TransformerBlock& block, const Variable& x, KvCache& cache, int64_t layer) {
  require_no_grad("cached_block_forward");
  const TransformerBlockOptions& o = block.options();
  if (x.dim() != 3 || x.shape()[-1] != o.d_model) {
    throw std::invalid_argument("cached_block_forward: x of shape " + x.shape().str() +
                                " must be (B, T_new, d_model=" + std::to_string(o.d_model) + ")");
  }
  // The block's dropout1 / dropout2 children apply `o.dropout` in training; the functional
  // dropout with the block's mode is the same operation (identity in eval).
  const bool training = block.is_training();
  const auto residual_dropout = [&](const Variable& branch) { return dropout(branch, o.dropout, training); };
  if (o.norm_first) {
    const Variable h = x + residual_dropout(cached_self_attention(block.attn(), block.norm1()(x), cache, layer));
    return h + residual_dropout(block.ff()(block.norm2()(h)));
  }
  const Variable h = block.norm1()(x + residual_dropout(cached_self_attention(block.attn(), x, cache, layer)));
  return block.norm2()(h + residual_dropout(block.ff()(h)));
}

}  // namespace ag
