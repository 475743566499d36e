// Transformer blocks: self-attention and a position-wise feed-forward network, each wrapped in
// a residual connection with a LayerNorm.
//   x: (B, T, d_model) -> (B, T, d_model)
//   post-norm (norm_first = false, the original paper and PyTorch's default):
//     h = norm1(x + dropout1(attn(x)));   y = norm2(h + dropout2(ff(h)))
//   pre-norm (norm_first = true):
//     h = x + dropout1(attn(norm1(x)));   y = h + dropout2(ff(norm2(h)))
//   children: attn (MultiHeadAttention), ff (PositionwiseFeedForward), norm1, norm2,
//             dropout1, dropout2
// Masks and biases go to the attention unchanged. A query that sees no key gets nothing from
// the attention branch (see attention_mask.h): its row is then the residual path alone.
//
// TransformerEncoder: n_layers blocks under blocks.0, blocks.1, ...; with norm_first a final
// LayerNorm `norm` follows (pre-norm blocks leave the residual stream unnormalised).
#pragma once

#include <cstdint>
#include <string>

#include "attograd/layers/attention.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/feed_forward.h"
#include "attograd/layers/layer_norm.h"
#include "attograd/layers/module.h"
#include "attograd/layers/sequential.h"

namespace ag {

struct TransformerBlockOptions {
  int64_t d_model = 0;
  int64_t n_head = 0;
  int64_t d_ff = 2048;    // hidden size of the feed-forward network (PyTorch's dim_feedforward)
  double dropout = 0.1;   // on both residual branches and inside the feed-forward network
  double attn_dropout = -1.0;  // on the attention weights; negative means `dropout` (as PyTorch)
  Activation activation = Activation::relu;
  bool norm_first = false;
  double layer_norm_eps = 1e-5;
  int64_t d_k = 0;            // per head; 0 means d_model / n_head
  int64_t d_v = 0;            // per head; 0 means d_model / n_head
  bool attn_bias = true;      // bias in the four attention projections
  bool ff_bias = true;        // bias in the two feed-forward layers
  double scale = 0.0;         // attention scale, as in ScaledDotProductAttentionOptions
  double temperature = 0.0;
};

class TransformerBlock : public Module {
 public:
  explicit TransformerBlock(const TransformerBlockOptions& options);

  Variable forward(const Variable& x, const AttentionMask& mask = {}, const AttentionBias& bias = {});
  Variable operator()(const Variable& x, const AttentionMask& mask = {}, const AttentionBias& bias = {}) {
    return forward(x, mask, bias);
  }
  const TransformerBlockOptions& options() const { return options_; }
  MultiHeadAttention& attn() { return attn_; }
  PositionwiseFeedForward& ff() { return ff_; }
  LayerNorm& norm1() { return norm1_; }
  LayerNorm& norm2() { return norm2_; }
  std::string name() const override;

 private:
  TransformerBlockOptions options_;
  MultiHeadAttention& attn_;
  PositionwiseFeedForward& ff_;
  LayerNorm& norm1_;
  LayerNorm& norm2_;
  Dropout& dropout1_;
  Dropout& dropout2_;
};

struct TransformerEncoderOptions {
  int64_t n_layers = 0;
  TransformerBlockOptions block;  // every block alike
};

class TransformerEncoder : public Module {
 public:
  explicit TransformerEncoder(const TransformerEncoderOptions& options);

  Variable forward(const Variable& x, const AttentionMask& mask = {}, const AttentionBias& bias = {});
  Variable operator()(const Variable& x, const AttentionMask& mask = {}, const AttentionBias& bias = {}) {
    return forward(x, mask, bias);
  }
  const TransformerEncoderOptions& options() const { return options_; }
  TransformerBlock& block(size_t i) { return blocks_[i]; }
  size_t size() const { return blocks_.size(); }
  // Only with norm_first; throws std::logic_error otherwise.
  LayerNorm& norm();
  std::string name() const override { return "TransformerEncoder"; }

 private:
  TransformerEncoderOptions options_;
  ModuleList<TransformerBlock>& blocks_;
  LayerNorm* norm_ = nullptr;
};

}  // namespace ag
