// Attention layers.
//
// ScaledDotProductAttention: the fused op of autograd/nn_ops.h as a module (it owns the
// dropout rate and follows train/eval).
//   q: (B, H, Tq, d_k), k: (B, H, Tk, d_k), v: (B, H, Tk, d_v)
//   -> output (B, H, Tq, d_v), weights (B, H, Tq, Tk)
//   weights = softmax(scale * q k^T + bias, over the keys the mask keeps); output = dropout(weights) v
// The scale is 1/sqrt(d_k) by default; `scale` sets it directly and `temperature` sets it to
// 1/temperature (the "temperature = sqrt(d_k)" of many hand-written versions is the default).
//
// MultiHeadAttention: projections w_q, w_k, w_v to n_head heads of d_k (queries, keys) and d_v
// (values), attention per head, concatenation, and the output projection w_o.
//   query: (B, Tq, q_dim), key: (B, Tk, k_dim), value: (B, Tk, v_dim) -> (B, Tq, d_model)
//   parameters: w_q.weight (n_head*d_k, q_dim), w_k.weight (n_head*d_k, k_dim),
//               w_v.weight (n_head*d_v, v_dim), w_o.weight (d_model, n_head*d_v), and the
//               matching .bias vectors when `bias` is on.
// Self-attention passes the same x three times; cross-attention passes different sequences
// (Tq != Tk allowed). Masks: see attention_mask.h. A query row that sees no key in any head
// gets a zero output row (the output bias is not added to it) and zero, finite gradients.
//
// Incremental decoding passes a layer of a KvCache (kv_cache.h) to the same forward, which then
// takes its keys and values from the cache instead of projecting all of them again:
//   cache.layer(i)         key and value are the T_new new positions: they are projected,
//                          appended, and the queries attend over all P + T_new cached positions
//                          (the mask must broadcast to (B, H, Tq, P + T_new): cache.causal_mask)
//   cache.memory_layer(i)  the first call projects key and value (B, S, .) into the empty layer;
//                          later calls only read them (key and value must still be (B, S, .))
// The output is what the uncached forward over every position gives for the query rows. With a
// cache, grad mode must be off (std::logic_error: run under a NoGradGuard), and a cache of
// another batch, head count, head size or dtype, or without room, is refused before anything
// is appended (std::invalid_argument naming the shapes).
//
// The key projection's bias never receives a gradient: it adds the same amount to every score
// of a query row, which softmax ignores. Gradient checks list it in zero_ok.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "attograd/layers/attention_mask.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/linear.h"
#include "attograd/layers/module.h"

namespace ag {

struct ScaledDotProductAttentionOptions {
  double scale = 0.0;        // multiplies q k^T; 0 means 1/sqrt(d_k)
  double temperature = 0.0;  // divides q k^T instead (scale = 1 / temperature); set at most one
  double dropout = 0.0;      // on the attention weights, in training only
};

struct AttentionOutput {
  Variable output;
  Tensor weights;  // (B, H, Tq, Tk) after masking and softmax, before dropout; not differentiable
};

class ScaledDotProductAttention : public Module {
 public:
  explicit ScaledDotProductAttention(const ScaledDotProductAttentionOptions& options = {});

  AttentionOutput forward(const Variable& q, const Variable& k, const Variable& v, const AttentionMask& mask = {},
                          const AttentionBias& bias = {});
  AttentionOutput operator()(const Variable& q, const Variable& k, const Variable& v, const AttentionMask& mask = {},
                             const AttentionBias& bias = {}) {
    return forward(q, k, v, mask, bias);
  }
  // The factor applied to q k^T for heads of size d_k.
  double scale_for(int64_t d_k) const;
  const ScaledDotProductAttentionOptions& options() const { return options_; }
  std::string name() const override;
  bool draws_random_numbers_in_training() const override { return options_.dropout > 0.0; }

 private:
  ScaledDotProductAttentionOptions options_;
};

struct MultiHeadAttentionOptions {
  int64_t d_model = 0;
  int64_t n_head = 0;
  int64_t d_k = 0;    // per head; 0 means d_model / n_head
  int64_t d_v = 0;    // per head; 0 means d_model / n_head
  int64_t q_dim = 0;  // input sizes of query, key and value; 0 means d_model
  int64_t k_dim = 0;
  int64_t v_dim = 0;
  bool bias = true;      // in all four projections
  double dropout = 0.0;  // on the attention weights
  double scale = 0.0;    // as in ScaledDotProductAttentionOptions
  double temperature = 0.0;
};

class MultiHeadAttention : public Module {
 public:
  explicit MultiHeadAttention(const MultiHeadAttentionOptions& options);

  // weights is defined only when need_weights is true; (B, H, Tq, Tk), Tk counting cached keys.
  AttentionOutput forward(const Variable& query, const Variable& key, const Variable& value,
                          const AttentionMask& mask = {}, const AttentionBias& bias = {}, bool need_weights = false,
                          const KvCacheLayer& cache = {});
  // Self-attention: x: (B, T, d_model) -> (B, T, d_model).
  AttentionOutput forward(const Variable& x, const AttentionMask& mask = {}, const AttentionBias& bias = {},
                          bool need_weights = false, const KvCacheLayer& cache = {}) {
    return forward(x, x, x, mask, bias, need_weights, cache);
  }

  // Options with every default resolved (d_k, d_v, q_dim, k_dim, v_dim filled in).
  const MultiHeadAttentionOptions& options() const { return options_; }
  // The projections; each may be replaced by another Linear (a LoRALinear: layers/lora.h).
  Linear& w_q() { return *w_q_; }
  Linear& w_k() { return *w_k_; }
  Linear& w_v() { return *w_v_; }
  Linear& w_o() { return *w_o_; }
  ScaledDotProductAttention& attention() { return attention_; }
  std::string name() const override { return "MultiHeadAttention"; }

 private:
  // (B, T, n_head * d) -> (B, n_head, T, d), a view.
  Variable split_heads(const Variable& x, int64_t d) const;
  // attention_cache.cpp. The number of keys the queries will see through `cache`, after
  // checking that the cache fits (grad mode, batch, heads, head sizes, dtype, room).
  int64_t cached_key_count(const KvCacheLayer& cache, const Variable& query, const Variable& key) const;
  // The keys (B, H, Tk, d_k) and values (B, H, Tk, d_v) the queries attend to: key and value
  // projected and appended as the cache's use says, then the cache's views.
  std::pair<Variable, Variable> cached_keys_values(const KvCacheLayer& cache, const Variable& key,
                                                   const Variable& value);

  MultiHeadAttentionOptions options_;
  Replaceable<Linear> w_q_;
  Replaceable<Linear> w_k_;
  Replaceable<Linear> w_v_;
  Replaceable<Linear> w_o_;
  ScaledDotProductAttention& attention_;
};

}  // namespace ag
