// The decoder side of the original Transformer: causal self-attention over the target,
// cross-attention from the target to the encoder's output ("memory"), a feed-forward network;
// each wrapped in a residual connection with a norm, as in the encoder block (transformer.h).
//   tgt: (B, T, d_model), memory: (B, S, d_memory) -> (B, T, d_model)
//   post-norm (norm_first = false, the original paper and PyTorch's default):
//     h = norm1(x + dropout1(self_attn(x)))
//     c = norm2(h + dropout2(multihead_attn(h, memory)))
//     y = norm3(c + dropout3(ff(c)))
//   pre-norm (norm_first = true):
//     h = x + dropout1(self_attn(norm1(x)))
//     c = h + dropout2(multihead_attn(norm2(h), memory))
//     y = c + dropout3(ff(norm3(c)))
//   children: self_attn, multihead_attn (MultiHeadAttention), ff, norm1, norm2, norm3,
//             dropout1, dropout2, dropout3
// The names are those of PyTorch's nn.TransformerDecoderLayer, but for the attention's
// projections (w_q, w_k, w_v, w_o, see attention.h) and the feed-forward, which is a slot
// (ff.linear1, ff.linear2) as in TransformerBlock.
//
// Sizes, dropout, norm placement and the ff / norm factories are TransformerBlockOptions, read
// exactly as the encoder block reads them. Memory may be of another width than the target
// (d_memory): the cross-attention's keys and values are projected from d_memory, its queries
// from d_model; with d_k != d_v per head the three sizes all differ.
//
// Masks say what each query may see (attention_mask.h); the layer adds none of its own:
//   tgt_mask     self-attention, broadcast to (B, H, T, T): for training, causal and the
//                target's padding, AttentionMask::causal(T) & AttentionMask::key_padding(tgt_lengths, T)
//   memory_mask  cross-attention, broadcast to (B, H, T, S): the source's padding,
//                AttentionMask::key_padding(src_lengths, S)
// Padded target positions produce outputs (they see the real keys before them); the loss must
// ignore them. A query that sees no key gets nothing from that attention branch.
//
// Incremental decoding (one target position, or a few, at a time) runs the same forward with
// two layers of KvCaches (kv_cache.h), both optional:
//   self_cache    cache.layer(i): the target's keys and values, growing by the new positions; tgt
//                 holds only the new positions P .. P+T_new-1 and tgt_mask broadcasts to
//                 (B, H, T_new, P + T_new): self_kv.causal_mask(i, T_new)
//   memory_cache  memory_kv.memory_layer(i): the cross-attention's keys and values, projected
//                 from memory by the first call and read by the later ones
// The output equals the rows P .. P+T_new-1 of the forward over every target position. Under
// a NoGradGuard only (see attention.h).
//
// TransformerDecoder: n_layers layers under layers.0, layers.1, ... (nn.TransformerDecoder's
// keys), each given the same memory and masks; with norm_first a final norm `norm` follows, as in
// TransformerEncoder (final_norm chooses, as there). Its caches hold one layer per decoder layer.
#pragma once

#include <cstdint>
#include <string>

#include "attograd/layers/attention.h"
#include "attograd/layers/attention_mask.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/module.h"
#include "attograd/layers/sequential.h"
#include "attograd/layers/sublayer.h"
#include "attograd/layers/transformer.h"

namespace ag {

struct TransformerDecoderLayerOptions {
  TransformerBlockOptions block;  // d_model, n_head, d_ff, dropout, norm_first, make_ff, ...
  int64_t d_memory = 0;           // width of the encoder's output; 0 means d_model
};

class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(const TransformerDecoderLayerOptions& options);

  // tgt: (B, T, d_model), memory: (B, S, d_memory) -> (B, T, d_model). std::invalid_argument
  // naming the layer and the shapes for inputs, masks or caches that do not fit.
  Variable forward(const Variable& tgt, const Variable& memory, const AttentionMask& tgt_mask = {},
                   const AttentionMask& memory_mask = {}, const KvCacheLayer& self_cache = {},
                   const KvCacheLayer& memory_cache = {});
  Variable operator()(const Variable& tgt, const Variable& memory, const AttentionMask& tgt_mask = {},
                      const AttentionMask& memory_mask = {}, const KvCacheLayer& self_cache = {},
                      const KvCacheLayer& memory_cache = {}) {
    return forward(tgt, memory, tgt_mask, memory_mask, self_cache, memory_cache);
  }

  // d_memory resolved (never 0).
  const TransformerDecoderLayerOptions& options() const { return options_; }
  MultiHeadAttention& self_attn() { return self_attn_; }
  MultiHeadAttention& multihead_attn() { return multihead_attn_; }
  Sublayer& ff() { return ff_; }
  Sublayer& norm1() { return norm1_; }
  Sublayer& norm2() { return norm2_; }
  Sublayer& norm3() { return norm3_; }
  template <class L>
  L& ff_as() { return sublayer_as<L>(ff_, *this, "ff"); }
  std::string name() const override;

 private:
  TransformerDecoderLayerOptions options_;
  MultiHeadAttention& self_attn_;
  MultiHeadAttention& multihead_attn_;
  Sublayer& ff_;
  Sublayer& norm1_;
  Sublayer& norm2_;
  Sublayer& norm3_;
  Dropout& dropout1_;
  Dropout& dropout2_;
  Dropout& dropout3_;
};

struct TransformerDecoderOptions {
  int64_t n_layers = 0;
  TransformerDecoderLayerOptions layer;  // every layer alike
  FinalNorm final_norm = FinalNorm::if_pre_norm;
};

class TransformerDecoder : public Module {
 public:
  explicit TransformerDecoder(const TransformerDecoderOptions& options);

  // The caches, when given, hold n_layers layers: layer i serves layer(i).
  Variable forward(const Variable& tgt, const Variable& memory, const AttentionMask& tgt_mask = {},
                   const AttentionMask& memory_mask = {}, KvCache* self_cache = nullptr,
                   KvCache* memory_cache = nullptr);
  Variable operator()(const Variable& tgt, const Variable& memory, const AttentionMask& tgt_mask = {},
                      const AttentionMask& memory_mask = {}, KvCache* self_cache = nullptr,
                      KvCache* memory_cache = nullptr) {
    return forward(tgt, memory, tgt_mask, memory_mask, self_cache, memory_cache);
  }
  const TransformerDecoderOptions& options() const { return options_; }
  TransformerDecoderLayer& layer(size_t i) { return layers_[i]; }
  size_t size() const { return layers_.size(); }
  // Only when it has a final norm (see FinalNorm); throws std::logic_error otherwise.
  Sublayer& norm();
  bool has_norm() const { return norm_ != nullptr; }
  // Activation recompute (autograd/recompute.h): when on, a training forward (grad mode, no
  // cache) keeps only each layer's input and runs the layer again during backward; the
  // gradients are the same bits, the memory of the layers' activations is one layer's. Off by
  // default; not a model option (checkpoints do not record it).
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }
  std::string name() const override { return "TransformerDecoder"; }

 private:
  TransformerDecoderOptions options_;
  ModuleList<TransformerDecoderLayer>& layers_;
  Sublayer* norm_ = nullptr;
  bool recompute_ = false;
};

}  // namespace ag
