// Transformer blocks: self-attention and a feed-forward network, each wrapped in a residual
// connection with a norm.
//   x: (B, T, d_model) -> (B, T, d_model)
//   post-norm (norm_first = false, the original paper and PyTorch's default):
//     h = norm1(x + dropout1(attn(x)));   y = norm2(h + dropout2(ff(h)))
//   pre-norm (norm_first = true):
//     h = x + dropout1(attn(norm1(x)));   y = h + dropout2(ff(norm2(h)))
//   children: attn (MultiHeadAttention), ff, norm1, norm2, dropout1, dropout2
// Masks and biases go to the attention unchanged. A query that sees no key gets nothing from
// the attention branch (see attention_mask.h): its row is then the residual path alone.
//
// Incremental decoding: the same forward with a layer of a KvCache (kv_cache.h), which the
// attention uses (attention.h); x then holds only the new positions P .. P+T_new-1 and the
// output equals those rows of the forward over all of them:
//   y = block.forward(x_new, cache.causal_mask(i, T_new), {}, cache.layer(i));
// Train and eval run the same code; in eval the dropouts pass their input through.
//
// The slots ff, norm1 and norm2 hold Sublayers (sublayer.h): by default PositionwiseFeedForward
// and LayerNorm, built from the options as PyTorch's nn.TransformerEncoderLayer builds them, so
// the parameter names (ff.linear1.weight, norm1.weight, ...) are its state_dict keys. A user's
// layer (a SwiGLU, an RMSNorm) takes a slot through the factories make_ff / make_norm, without
// copying the block; its parameters appear under the slot's name, and the residual dropouts
// (dropout1, dropout2) stay the block's:
//
//   TransformerBlockOptions o{.d_model = 64, .n_head = 4, .norm_first = true};
//   o.make_ff = [](const TransformerBlockOptions& b) { return std::make_unique<SwiGLU>(b.d_model, 4 * b.d_model); };
//   o.make_norm = [](const TransformerBlockOptions& b) { return std::make_unique<RMSNorm>(b.d_model); };
//   TransformerBlock block(o);   // ff.w_gate.weight, norm1.weight, norm2.weight, ...
//
// ff(), norm1() and norm2() return the Sublayer; ff_as<PositionwiseFeedForward>() (and
// norm1_as<L>, ...) the concrete layer, or std::logic_error naming both types.
//
// TransformerEncoder: n_layers blocks under blocks.0, blocks.1, ...; with norm_first a final
// norm `norm` follows (pre-norm blocks leave the residual stream unnormalised), built by the
// block options' make_norm when it is set. FinalNorm::always adds it after post-norm blocks
// too, as nn.Transformer does; FinalNorm::never leaves it out.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "attograd/layers/attention.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/feed_forward.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/layer_norm.h"
#include "attograd/layers/module.h"
#include "attograd/layers/sequential.h"
#include "attograd/layers/sublayer.h"

namespace ag {

// Upper bounds of a transformer model's sizes, one set for every model of the library: the same
// for the command line and for a checkpoint's metadata, so that no file can ask for a model the
// command line would refuse.
struct TransformerLimits {
  static constexpr int64_t vocab = int64_t{1} << 20;
  static constexpr int64_t max_len = 4096;
  static constexpr int64_t d_model = int64_t{1} << 16;
  static constexpr int64_t n_head = int64_t{1} << 16;
  static constexpr int64_t d_ff = int64_t{1} << 20;
  static constexpr int64_t n_layers = 1024;
};

struct TransformerBlockOptions;
// Builds the layer of one slot from the options of the block it goes into (d_model, d_ff,
// dropout, ...: the factory reads what it needs). Must return a non-null layer that maps
// (B, T, d_model) to the same shape.
using SublayerFactory = std::function<std::unique_ptr<Sublayer>(const TransformerBlockOptions&)>;

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
  // Unset: PositionwiseFeedForward(d_model, d_ff, activation, dropout, ff_bias). When set,
  // d_ff, activation and ff_bias mean whatever the factory makes of them.
  SublayerFactory make_ff = nullptr;
  // Unset: LayerNorm(d_model, layer_norm_eps). Called once for norm1 and once for norm2 (and
  // by TransformerEncoder for its final norm), so each gets parameters of its own.
  SublayerFactory make_norm = nullptr;
};

class TransformerBlock : public Module {
 public:
  explicit TransformerBlock(const TransformerBlockOptions& options);

  // cache: the attention's layer of a KvCache, or none.
  Variable forward(const Variable& x, const AttentionMask& mask = {}, const AttentionBias& bias = {},
                   const KvCacheLayer& cache = {});
  Variable operator()(const Variable& x, const AttentionMask& mask = {}, const AttentionBias& bias = {},
                      const KvCacheLayer& cache = {}) {
    return forward(x, mask, bias, cache);
  }
  const TransformerBlockOptions& options() const { return options_; }
  MultiHeadAttention& attn() { return attn_; }
  Sublayer& ff() { return ff_; }
  Sublayer& norm1() { return norm1_; }
  Sublayer& norm2() { return norm2_; }
  // The slot's layer as its concrete type; std::logic_error naming both types otherwise.
  template <class L>
  L& ff_as() { return sublayer_as<L>(ff_, *this, "ff"); }
  template <class L>
  L& norm1_as() { return sublayer_as<L>(norm1_, *this, "norm1"); }
  template <class L>
  L& norm2_as() { return sublayer_as<L>(norm2_, *this, "norm2"); }
  std::string name() const override;

 private:
  TransformerBlockOptions options_;
  MultiHeadAttention& attn_;
  Sublayer& ff_;
  Sublayer& norm1_;
  Sublayer& norm2_;
  Dropout& dropout1_;
  Dropout& dropout2_;
};

// Whether a stack (TransformerEncoder, TransformerDecoder) ends with a norm of its own.
enum class FinalNorm {
  if_pre_norm,  // only after pre-norm layers, whose output is otherwise unnormalised
  always,       // nn.Transformer's encoder and decoder: also after post-norm layers
  never,
};
// True when a stack of layers with `norm_first` gets its final norm under `final_norm`.
bool has_final_norm(FinalNorm final_norm, bool norm_first);

struct TransformerEncoderOptions {
  int64_t n_layers = 0;
  TransformerBlockOptions block;  // every block alike
  FinalNorm final_norm = FinalNorm::if_pre_norm;
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
  // Only when it has a final norm (see FinalNorm); throws std::logic_error otherwise.
  Sublayer& norm();
  bool has_norm() const { return norm_ != nullptr; }
  template <class L>
  L& norm_as() { return sublayer_as<L>(norm(), *this, "norm"); }
  // Activation recompute (autograd/recompute.h): when on, a training forward (grad mode, no
  // cache) keeps only each block's input and runs the block again during backward; the
  // gradients are the same bits, the memory of the blocks' activations is one block's. Off by
  // default; not a model option (checkpoints do not record it).
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }
  std::string name() const override { return "TransformerEncoder"; }

 private:
  TransformerEncoderOptions options_;
  ModuleList<TransformerBlock>& blocks_;
  Sublayer* norm_ = nullptr;
  bool recompute_ = false;
};

}  // namespace ag
