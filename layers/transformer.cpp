#include "attograd/layers/transformer.h"

#include <stdexcept>

#include "attograd/autograd/ops.h"

namespace ag {

namespace {

MultiHeadAttentionOptions attention_options(const TransformerBlockOptions& o) {
  MultiHeadAttentionOptions a;
  a.d_model = o.d_model;
  a.n_head = o.n_head;
  a.d_k = o.d_k;
  a.d_v = o.d_v;
  a.bias = o.attn_bias;
  a.dropout = o.attn_dropout < 0.0 ? o.dropout : o.attn_dropout;
  a.scale = o.scale;
  a.temperature = o.temperature;
  return a;
}

PositionwiseFeedForwardOptions feed_forward_options(const TransformerBlockOptions& o) {
  return {o.d_model, o.d_ff, o.activation, o.dropout, o.ff_bias};
}

std::unique_ptr<LayerNorm> norm_of(const TransformerBlockOptions& o) {
  return std::make_unique<LayerNorm>(o.d_model, o.layer_norm_eps);
}

}  // namespace

TransformerBlock::TransformerBlock(const TransformerBlockOptions& options)
    : options_(options),
      attn_(register_module("attn", std::make_unique<MultiHeadAttention>(attention_options(options)))),
      ff_(register_module("ff", std::make_unique<PositionwiseFeedForward>(feed_forward_options(options)))),
      norm1_(register_module("norm1", norm_of(options))),
      norm2_(register_module("norm2", norm_of(options))),
      dropout1_(register_module("dropout1", std::make_unique<Dropout>(options.dropout))),
      dropout2_(register_module("dropout2", std::make_unique<Dropout>(options.dropout))) {}

Variable TransformerBlock::forward(const Variable& x, const AttentionMask& mask, const AttentionBias& bias) {
  if (x.dim() != 3 || x.shape()[-1] != options_.d_model) {
    throw std::invalid_argument("TransformerBlock: input of shape " + x.shape().str() + " must be (B, T, d_model=" +
                                std::to_string(options_.d_model) + ")");
  }
  if (options_.norm_first) {
    const Variable h = x + dropout1_(attn_.forward(norm1_(x), mask, bias).output);
    return h + dropout2_(ff_(norm2_(h)));
  }
  const Variable h = norm1_(x + dropout1_(attn_.forward(x, mask, bias).output));
  return norm2_(h + dropout2_(ff_(h)));
}

std::string TransformerBlock::name() const {
  return options_.norm_first ? "TransformerBlock(pre-norm)" : "TransformerBlock(post-norm)";
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderOptions& options)
    : options_(options), blocks_(register_module("blocks", std::make_unique<ModuleList<TransformerBlock>>())) {
  if (options.n_layers <= 0) {
    throw std::invalid_argument("TransformerEncoder: n_layers must be positive, got " +
                                std::to_string(options.n_layers));
  }
  for (int64_t i = 0; i < options.n_layers; ++i) blocks_.push_back(std::make_unique<TransformerBlock>(options.block));
  if (options.block.norm_first) norm_ = &register_module("norm", norm_of(options.block));
}

Variable TransformerEncoder::forward(const Variable& x, const AttentionMask& mask, const AttentionBias& bias) {
  Variable h = x;
  for (TransformerBlock* block : blocks_) h = block->forward(h, mask, bias);
  return norm_ ? (*norm_)(h) : h;
}

LayerNorm& TransformerEncoder::norm() {
  if (!norm_) throw std::logic_error("TransformerEncoder::norm: only pre-norm encoders (norm_first) have a final norm");
  return *norm_;
}

}  // namespace ag
