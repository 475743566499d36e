// GroupedQueryAttention: the self-attention of Llama, Qwen2/3 and Mistral (Hugging Face's
// LlamaAttention). n_head query heads share n_kv_head key/value heads in groups of
// n_head / n_kv_head (n_kv_head = n_head is ordinary multi-head attention, 1 is multi-query);
// queries and keys are turned by rotary position embedding before their product.
//   x: (B, T, d_model) -> (B, T, d_model)
//   q = q_proj(x) as (B, T, n_head, head_dim), k = k_proj(x) and v = v_proj(x) as
//   (B, T, n_kv_head, head_dim); with qk_norm (Qwen3) q = q_norm(q), k = k_norm(k) over head_dim;
//   q, k = rotary(q), rotary(k) at positions P .. P + T - 1 (P: positions already cached);
//   o = attention(q, k, v, mask) with each key/value head read in place by its group;
//   y = o_proj(o as (B, T, n_head * head_dim))
//   parameters: q_proj.weight (n_head * head_dim, d_model), k_proj.weight and v_proj.weight
//   (n_kv_head * head_dim, d_model), o_proj.weight (d_model, n_head * head_dim); with qkv_bias
//   (Qwen2) q/k/v_proj.bias; with o_bias o_proj.bias; with qk_norm q_norm.weight and
//   k_norm.weight (head_dim). These are Hugging Face's names under "self_attn.".
//
// Masks go to the attention op as they are (causal for a decoder: AttentionMask::causal(T)). A
// query row that sees no key gets a zero output row, as in MultiHeadAttention.
//
// Incremental decoding passes a layer of a KvCache made with n_head = n_kv_head and
// d_k = head_dim: the new positions' rotated keys and their values are appended, and the queries
// attend over every cached position (mask: cache.causal_mask(layer, T)). The cache holds
// n_kv_head heads, not n_head: grouped-query attention's memory saving holds in the cache too.
// Grad mode must be off, and a cache of another shape or without room is refused before
// anything is appended.
#pragma once

#include <cstdint>
#include <string>

#include "attograd/layers/attention_mask.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/linear.h"
#include "attograd/layers/module.h"
#include "attograd/layers/rms_norm.h"
#include "attograd/layers/rotary.h"

namespace ag {

struct GroupedQueryAttentionOptions {
  int64_t d_model = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;  // 0 means n_head; must divide n_head
  int64_t head_dim = 0;   // 0 means d_model / n_head
  bool qkv_bias = false;  // biases in q_proj, k_proj and v_proj (Qwen2)
  bool o_bias = false;
  bool qk_norm = false;  // RMSNorm of each query and key head before the rotation (Qwen3)
  double norm_eps = 1e-6;
  double dropout = 0.0;  // on the attention weights, in training
  // The rotation; its head_dim is set from the one above, max_positions must be given.
  RotaryOptions rotary;
};

class GroupedQueryAttention : public Module {
 public:
  explicit GroupedQueryAttention(const GroupedQueryAttentionOptions& options);

  Variable forward(const Variable& x, const AttentionMask& mask = {}, const KvCacheLayer& cache = {});
  Variable operator()(const Variable& x, const AttentionMask& mask = {}, const KvCacheLayer& cache = {}) {
    return forward(x, mask, cache);
  }
  // Options with every default resolved.
  const GroupedQueryAttentionOptions& options() const { return options_; }
  Linear& q_proj() { return *q_proj_; }
  Linear& k_proj() { return *k_proj_; }
  Linear& v_proj() { return *v_proj_; }
  Linear& o_proj() { return *o_proj_; }
  RotaryEmbedding& rotary() { return rotary_; }
  std::string name() const override;
  bool draws_random_numbers_in_training() const override { return options_.dropout > 0.0; }

 private:
  // The positions the cache already holds for this layer, after checking that it fits.
  int64_t cached_positions(const KvCacheLayer& cache, const Variable& x) const;

  GroupedQueryAttentionOptions options_;
  Replaceable<Linear> q_proj_;
  Replaceable<Linear> k_proj_;
  Replaceable<Linear> v_proj_;
  Replaceable<Linear> o_proj_;
  RMSNorm* q_norm_ = nullptr;
  RMSNorm* k_norm_ = nullptr;
  RotaryEmbedding& rotary_;
};

}  // namespace ag
