#include "attograd/layers/transformer_decoder.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "attograd/autograd/ops.h"
#include "attograd/autograd/recompute.h"
#include "attograd/layers/transformer_slots.h"

namespace ag {

namespace {

using transformer_detail::attention_options;
using transformer_detail::feed_forward_slot;
using transformer_detail::norm_slot;
using transformer_detail::residual;

TransformerDecoderLayerOptions resolved(TransformerDecoderLayerOptions o) {
  if (o.d_memory == 0) o.d_memory = o.block.d_model;
  if (o.d_memory < 0) {
    throw std::invalid_argument("TransformerDecoderLayer: d_memory must be positive (or 0 for d_model), got " +
                                std::to_string(o.d_memory));
  }
  return o;
}

std::string layer_name(const TransformerDecoderLayerOptions& o) {
  return o.block.norm_first ? "TransformerDecoderLayer(pre-norm)" : "TransformerDecoderLayer(post-norm)";
}

// Queries from the target (d_model wide), keys and values from the memory (d_memory wide).
MultiHeadAttentionOptions cross_attention_options(const TransformerDecoderLayerOptions& o) {
  MultiHeadAttentionOptions a = attention_options(o.block);
  a.k_dim = o.d_memory;
  a.v_dim = o.d_memory;
  return a;
}

// The op a mask's error names: the layer and the mask. Literals rather than name() + "...",
// since decoding runs this check for every token and layer.
const char* mask_op(bool norm_first, bool self_attention) {
  if (self_attention) {
    return norm_first ? "TransformerDecoderLayer(pre-norm) tgt_mask (self-attention)"
                      : "TransformerDecoderLayer(post-norm) tgt_mask (self-attention)";
  }
  return norm_first ? "TransformerDecoderLayer(pre-norm) memory_mask (cross-attention)"
                    : "TransformerDecoderLayer(post-norm) memory_mask (cross-attention)";
}

void check_cache_use(const KvCacheLayer& cache, KvCacheUse use, const Module& layer, const char* which,
                     const char* maker) {
  if (!cache.empty() && cache.use != use) {
    throw std::invalid_argument(layer.name() + ": " + which + " is the wrong use of layer " + std::to_string(cache.index) +
                                " of its cache; pass " + maker);
  }
}

void check_cache_layers(const KvCache* cache, size_t layers, const char* which) {
  if (cache != nullptr && cache->n_layers() != static_cast<int64_t>(layers)) {
    throw std::invalid_argument(std::string("TransformerDecoder: ") + which + " holds n_layers=" +
                                std::to_string(cache->n_layers()) + " layers for a decoder of " +
                                std::to_string(layers) + " layers");
  }
}

}  // namespace

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerDecoderLayerOptions& options)
    : options_(resolved(options)),
      // Registration order is PyTorch's (self_attn, multihead_attn, feed-forward, norms), so the
      // default layers draw their initial values in that order.
      self_attn_(register_module("self_attn", std::make_unique<MultiHeadAttention>(attention_options(options_.block)))),
      multihead_attn_(register_module("multihead_attn",
                                      std::make_unique<MultiHeadAttention>(cross_attention_options(options_)))),
      ff_(register_module("ff", feed_forward_slot(options_.block, layer_name(options_)))),
      norm1_(register_module("norm1", norm_slot(options_.block, layer_name(options_), "norm1"))),
      norm2_(register_module("norm2", norm_slot(options_.block, layer_name(options_), "norm2"))),
      norm3_(register_module("norm3", norm_slot(options_.block, layer_name(options_), "norm3"))),
      dropout1_(register_module("dropout1", std::make_unique<Dropout>(options_.block.dropout))),
      dropout2_(register_module("dropout2", std::make_unique<Dropout>(options_.block.dropout))),
      dropout3_(register_module("dropout3", std::make_unique<Dropout>(options_.block.dropout))) {}

Variable TransformerDecoderLayer::forward(const Variable& tgt, const Variable& memory, const AttentionMask& tgt_mask,
                                          const AttentionMask& memory_mask, const KvCacheLayer& self_cache,
                                          const KvCacheLayer& memory_cache) {
  const int64_t d_model = options_.block.d_model, d_memory = options_.d_memory;
  const bool tgt_ok = tgt.dim() == 3 && tgt.shape()[-1] == d_model;
  const bool memory_ok = memory.dim() == 3 && memory.shape()[-1] == d_memory;
  if (!tgt_ok || !memory_ok || tgt.shape()[0] != memory.shape()[0]) {
    throw std::invalid_argument(name() + ": expected tgt (B, T, d_model=" + std::to_string(d_model) +
                                ") and memory (B, S, d_memory=" + std::to_string(d_memory) +
                                ") with the same B, got tgt=" + tgt.shape().str() + " memory=" + memory.shape().str());
  }
  check_cache_use(self_cache, KvCacheUse::append, *this, "self_cache", "cache.layer(i)");
  check_cache_use(memory_cache, KvCacheUse::memory, *this, "memory_cache", "cache.memory_layer(i)");
  // The masks are checked here, naming which one does not fit, before either attention runs.
  // With a self cache the new positions also see the P cached ones.
  const int64_t B = tgt.shape()[0], T = tgt.shape()[1], S = memory.shape()[1], H = options_.block.n_head;
  const int64_t past = self_cache.empty() ? 0 : self_cache.cache->length(self_cache.index);
  const bool pre = options_.block.norm_first;
  tgt_mask.check(mask_op(pre, true), B, H, T, past + T);
  memory_mask.check(mask_op(pre, false), B, H, T, S);

  const Variable h = residual(pre, tgt, norm1_, dropout1_, *this, "norm1", [&](const Variable& v) {
    return self_attn_.forward(v, tgt_mask, {}, false, self_cache).output;
  });
  const Variable c = residual(pre, h, norm2_, dropout2_, *this, "norm2", [&](const Variable& v) {
    return multihead_attn_.forward(v, memory, memory, memory_mask, {}, false, memory_cache).output;
  });
  return residual(pre, c, norm3_, dropout3_, *this, "norm3",
                  [&](const Variable& v) { return apply_sublayer(ff_, v, *this, "ff"); });
}

std::string TransformerDecoderLayer::name() const { return layer_name(options_); }

TransformerDecoder::TransformerDecoder(const TransformerDecoderOptions& options)
    : options_(options),
      layers_(register_module("layers", std::make_unique<ModuleList<TransformerDecoderLayer>>())) {
  if (options.n_layers <= 0) {
    throw std::invalid_argument("TransformerDecoder: n_layers must be positive, got " +
                                std::to_string(options.n_layers));
  }
  for (int64_t i = 0; i < options.n_layers; ++i) {
    layers_.push_back(std::make_unique<TransformerDecoderLayer>(options.layer));
  }
  options_.layer = layers_[0].options();  // d_memory resolved
  if (has_final_norm(options.final_norm, options.layer.block.norm_first)) {
    norm_ = &register_module("norm", norm_slot(options.layer.block, name(), "norm"));
  }
}

Variable TransformerDecoder::forward(const Variable& tgt, const Variable& memory, const AttentionMask& tgt_mask,
                                     const AttentionMask& memory_mask, KvCache* self_cache, KvCache* memory_cache) {
  check_cache_layers(self_cache, layers_.size(), "the self-attention cache");
  check_cache_layers(memory_cache, layers_.size(), "the memory cache");
  Variable h = tgt;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int64_t l = static_cast<int64_t>(i);
    if (recompute_ && self_cache == nullptr && memory_cache == nullptr) {
      TransformerDecoderLayer* layer = &layers_[i];
      h = ag::recompute(
          "TransformerDecoderLayer (recomputed)",
          [layer, tgt_mask, memory_mask](const std::vector<Variable>& in) {
            return layer->forward(in[0], in[1], tgt_mask, memory_mask);
          },
          {h, memory}, layer->parameters());
      continue;
    }
    h = layers_[i].forward(h, memory, tgt_mask, memory_mask, self_cache ? self_cache->layer(l) : KvCacheLayer{},
                           memory_cache ? memory_cache->memory_layer(l) : KvCacheLayer{});
  }
  return norm_ ? apply_sublayer(*norm_, h, *this, "norm") : h;
}

Sublayer& TransformerDecoder::norm() {
  if (!norm_) {
    throw std::logic_error("TransformerDecoder::norm: this decoder has no final norm (it has one with norm_first, "
                           "or with final_norm = FinalNorm::always)");
  }
  return *norm_;
}

}  // namespace ag
