#include "attograd/layers/transformer.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "attograd/autograd/ops.h"
#include "attograd/autograd/recompute.h"
#include "attograd/layers/transformer_slots.h"

namespace ag {

namespace transformer_detail {

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

namespace {

std::unique_ptr<Sublayer> default_feed_forward(const TransformerBlockOptions& o) {
  return std::make_unique<PositionwiseFeedForward>(
      PositionwiseFeedForwardOptions{o.d_model, o.d_ff, o.activation, o.dropout, o.ff_bias});
}

std::unique_ptr<Sublayer> default_norm(const TransformerBlockOptions& o) {
  return std::make_unique<LayerNorm>(o.d_model, o.layer_norm_eps);
}

// The layer for `owner`'s slot `slot`: the user's factory's, or the default one. The slots are
// built in registration order (attn, ff, norm1, norm2), so default layers draw their initial
// values from the generator exactly where they always did, and a factory's layer draws there.
std::unique_ptr<Sublayer> slot_layer(const SublayerFactory& factory,
                                     std::unique_ptr<Sublayer> (*default_layer)(const TransformerBlockOptions&),
                                     const TransformerBlockOptions& o, const std::string& owner, const char* slot) {
  if (!factory) return default_layer(o);
  std::unique_ptr<Sublayer> layer = factory(o);
  if (!layer) {
    throw std::invalid_argument(owner + ": the factory for slot " + slot + " returned a null layer; it must return a " +
                                "Sublayer mapping (B, T, d_model=" + std::to_string(o.d_model) + ") to the same shape");
  }
  return layer;
}

}  // namespace

std::unique_ptr<Sublayer> feed_forward_slot(const TransformerBlockOptions& o, const std::string& owner) {
  return slot_layer(o.make_ff, default_feed_forward, o, owner, "ff");
}

std::unique_ptr<Sublayer> norm_slot(const TransformerBlockOptions& o, const std::string& owner, const char* slot) {
  return slot_layer(o.make_norm, default_norm, o, owner, slot);
}

}  // namespace transformer_detail

namespace {

using transformer_detail::attention_options;
using transformer_detail::feed_forward_slot;
using transformer_detail::norm_slot;
using transformer_detail::residual;

std::string block_name(const TransformerBlockOptions& o) {
  return o.norm_first ? "TransformerBlock(pre-norm)" : "TransformerBlock(post-norm)";
}

}  // namespace

bool has_final_norm(FinalNorm final_norm, bool norm_first) {
  switch (final_norm) {
    case FinalNorm::if_pre_norm: return norm_first;
    case FinalNorm::always: return true;
    case FinalNorm::never: return false;
  }
  return norm_first;
}

TransformerBlock::TransformerBlock(const TransformerBlockOptions& options)
    : options_(options),
      attn_(register_module("attn", std::make_unique<MultiHeadAttention>(attention_options(options)))),
      ff_(register_module("ff", feed_forward_slot(options, block_name(options)))),
      norm1_(register_module("norm1", norm_slot(options, block_name(options), "norm1"))),
      norm2_(register_module("norm2", norm_slot(options, block_name(options), "norm2"))),
      dropout1_(register_module("dropout1", std::make_unique<Dropout>(options.dropout))),
      dropout2_(register_module("dropout2", std::make_unique<Dropout>(options.dropout))) {}

Variable TransformerBlock::forward(const Variable& x, const AttentionMask& mask, const AttentionBias& bias,
                                   const KvCacheLayer& cache) {
  if (x.dim() != 3 || x.shape()[-1] != options_.d_model) {
    throw std::invalid_argument("TransformerBlock: input of shape " + x.shape().str() + " must be (B, T, d_model=" +
                                std::to_string(options_.d_model) + ")");
  }
  // Each slot's output shape is checked, naming the slot: a layer that changed it would
  // otherwise be broadcast silently into the residual sum.
  const bool pre = options_.norm_first;
  const Variable h = residual(pre, x, norm1_, dropout1_, *this, "norm1",
                              [&](const Variable& v) { return attn_.forward(v, mask, bias, false, cache).output; });
  return residual(pre, h, norm2_, dropout2_, *this, "norm2",
                  [&](const Variable& v) { return apply_sublayer(ff_, v, *this, "ff"); });
}

std::string TransformerBlock::name() const { return block_name(options_); }

TransformerEncoder::TransformerEncoder(const TransformerEncoderOptions& options)
    : options_(options), blocks_(register_module("blocks", std::make_unique<ModuleList<TransformerBlock>>())) {
  if (options.n_layers <= 0) {
    throw std::invalid_argument("TransformerEncoder: n_layers must be positive, got " +
                                std::to_string(options.n_layers));
  }
  for (int64_t i = 0; i < options.n_layers; ++i) blocks_.push_back(std::make_unique<TransformerBlock>(options.block));
  if (has_final_norm(options.final_norm, options.block.norm_first)) {
    norm_ = &register_module("norm", norm_slot(options.block, name(), "norm"));
  }
}

Variable TransformerEncoder::forward(const Variable& x, const AttentionMask& mask, const AttentionBias& bias) {
  Variable h = x;
  for (TransformerBlock* block : blocks_) {
    if (recompute_) {
      h = ag::recompute(
          "TransformerBlock (recomputed)",
          [block, mask, bias](const std::vector<Variable>& in) { return block->forward(in[0], mask, bias); }, {h},
          block->parameters());
    } else {
      h = block->forward(h, mask, bias);
    }
  }
  return norm_ ? apply_sublayer(*norm_, h, *this, "norm") : h;
}

Sublayer& TransformerEncoder::norm() {
  if (!norm_) {
    throw std::logic_error("TransformerEncoder::norm: this encoder has no final norm (it has one with norm_first, "
                           "or with final_norm = FinalNorm::always)");
  }
  return *norm_;
}

}  // namespace ag
