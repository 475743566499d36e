// Seq2Seq: the encoder-decoder of "Attention Is All You Need", for sequences of different
// lengths padded to the longest of their batch.
//
//   Seq2Seq model({.src_vocab = 14, .tgt_vocab = 14, .max_len = 20, .d_model = 64, .n_head = 4});
//   Variable logits = model(src, {5, 2}, tgt_in, {3, 4});   // src (B, S), tgt_in (B, T) -> (B, T, tgt_vocab)
//   Variable loss = cross_entropy(logits, tgt_out, {.ignore_index = pad});
//
//   src (B, S) --src_embed * sqrt(d_model) + positions--> dropout [--> src_norm] --> encoder
//     --> memory (B, S, d_model)
//   tgt (B, T) --tgt_embed * sqrt(d_model) + positions--> dropout [--> tgt_norm] --> decoder(., memory)
//     --> head [* d_model^-1/2] --> logits (B, T, tgt_vocab)
//
// Masks come from the lengths (each in [1, S] or [1, T]); positions past a length are padding
// and their token ids are never read for anything but the lookup (any id in range will do):
//   encoder self-attention    key_padding(src_lengths, S)
//   decoder self-attention    causal(T) & key_padding(tgt_lengths, T)
//   decoder cross-attention   key_padding(src_lengths, S)
// The logits at padded target positions are computed but mean nothing: the loss ignores them
// (cross_entropy with ignore_index at those targets), and then padding is inert: more pad
// positions on either side change neither the loss nor any gradient.
//
// The encoder and decoder end with a final norm each whatever norm_first says (unless final_norm
// is off), as nn.Transformer's do (post-norm, the default, is the original Transformer).
//
// The defaults build nn.Transformer's version of the model. The seed implementation of the
// original Transformer (the PyTorch code attograd's attention layers came from) builds it
// otherwise, and these options say how:
//   input_norm = true        a LayerNorm on each stack's input, after the positions and dropout
//                            (src_norm, tgt_norm)
//   final_norm = false       no norm after the stacks: their post-norm layers end on one
//   layer_norm_eps = 1e-6    in every LayerNorm (PyTorch's default is 1e-5)
//   attn_bias = false        the attention projections w_q, w_k, w_v, w_o without bias
//   d_k, d_v                 head sizes of their own; with both set n_head need not divide d_model
//   scale_logits = true      logits times d_model^-1/2: with scale_embeddings = false and a tied
//                            head, the shared table is scaled on the way out instead of the way in
//
// Parameters (state_dict keys):
//   src_embed.weight, tgt_embed.weight   (vocab, d_model); one `embed.weight` when shared
//   pos.weight (learned, (max_len, d_model)) or the buffer pos.pe (sinusoidal), one table for
//     both sides
//   encoder.blocks.<i>.{attn.w_q, attn.w_k, attn.w_v, attn.w_o, ff.linear1, ff.linear2, norm1, norm2}.*,
//   src_norm.*, tgt_norm.*               with input_norm
//   encoder.norm.*                       attograd's encoder names (layers/transformer.h)
//   decoder.layers.<i>.{self_attn.w_*, multihead_attn.w_*, ff.linear1, ff.linear2, norm1..norm3}.*,
//   decoder.norm.*                       nn.Transformer's decoder names, but for the projections;
//                                        encoder.norm and decoder.norm only with final_norm
//   head.weight, head.bias               absent when tied: the head multiplies by tgt_embed.weight
// The encoder's keys are those of the existing encoder (blocks.<i>.attn), not nn.Transformer's
// (layers.<i>.self_attn); tests/parity/torch_reference.py maps between the two.
//
// Initialisation: the layers' own (PyTorch's) for attention, feed-forward and norms; the token
// tables N(0, d_model^-1/2), so that embeddings times sqrt(d_model) have unit variance (and a
// tied head starts with logits of unit size). Drawn from default_generator(): seed it first.
//
// Incremental decoding passes a Seq2SeqCache to decode: the target then holds only the new
// positions P .. P+T_new-1 (P = cache.self.length()), the decoder's self-attention appends their
// keys and values, its cross-attention reads the memory's keys and values, projected by the
// first cached decode. The same decoder forward runs with and without it (layers/kv_cache.h).
// Greedy decoding and beam search on top of it are in models/seq2seq/seq2seq_decode.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/layers/attention_mask.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/embedding.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/layer_norm.h"
#include "attograd/layers/linear.h"
#include "attograd/layers/module.h"
#include "attograd/layers/positional.h"
#include "attograd/layers/positional.h"
#include "attograd/layers/transformer.h"
#include "attograd/layers/transformer.h"
#include "attograd/layers/transformer_decoder.h"

namespace ag {

struct Seq2SeqOptions {
  int64_t src_vocab = 0;
  int64_t tgt_vocab = 0;   // 0 means src_vocab
  int64_t max_len = 0;     // longest source and longest target the positions cover
  int64_t d_model = 0;
  int64_t n_head = 0;      // must divide d_model
  int64_t d_ff = 2048;
  int64_t n_encoder_layers = 6;
  int64_t n_decoder_layers = 6;
  double dropout = 0.1;    // after the positional sums and inside every layer
  bool norm_first = false;
  Activation activation = Activation::relu;
  PositionalKind positional = PositionalKind::sinusoidal;
  bool share_embeddings = false;  // one table for source and target; needs src_vocab == tgt_vocab
  bool tie_head = false;          // the head's weight is the target table
  bool scale_embeddings = true;   // multiply looked-up embeddings by sqrt(d_model), as the paper
  // Where the original Transformer's seed implementation differs from nn.Transformer (see the
  // top of this file); each default keeps nn.Transformer's choice.
  bool input_norm = false;        // a LayerNorm on each stack's input (after positions and dropout)
  bool final_norm = true;         // a LayerNorm after each stack, whatever norm_first says
  double layer_norm_eps = 1e-5;   // in every LayerNorm of the model
  bool attn_bias = true;          // bias in the four projections of every attention
  int64_t d_k = 0;                // per head, queries and keys; 0 means d_model / n_head
  int64_t d_v = 0;                // per head, values; 0 means d_model / n_head
  bool scale_logits = false;      // multiply the logits by 1/sqrt(d_model)
};

// The upper bounds of the options: the transformers' (layers/transformer.h).
using Seq2SeqLimits = TransformerLimits;

// Throws std::invalid_argument naming the first bad option and its value.
void validate(const Seq2SeqOptions& options);

// The caches of one incremental decoding, one layer per decoder layer in each (make_cache).
struct Seq2SeqCache {
  KvCache self;    // the decoder's self-attention: every target position fed so far, up to max_len
  KvCache memory;  // the cross-attention: the memory's S positions, stored by the first decode
};

class Seq2Seq : public Module {
 public:
  explicit Seq2Seq(const Seq2SeqOptions& options);

  // src (B, S) in [0, src_vocab), tgt (B, T) in [0, tgt_vocab), S and T in [1, max_len], one
  // length per batch element in [1, S] / [1, T] -> logits (B, T, tgt_vocab). Everything is
  // checked first (std::invalid_argument naming the op, the argument and the values).
  Variable forward(const Indices& src, const std::vector<int64_t>& src_lengths, const Indices& tgt,
                   const std::vector<int64_t>& tgt_lengths);
  Variable operator()(const Indices& src, const std::vector<int64_t>& src_lengths, const Indices& tgt,
                      const std::vector<int64_t>& tgt_lengths) {
    return forward(src, src_lengths, tgt, tgt_lengths);
  }
  // The same after the token lookups: src_x (B, S, d_model), tgt_x (B, T, d_model) as the
  // tables give them (before the sqrt(d_model) scale). For gradient checks on the inputs.
  Variable forward_embedded(const Variable& src_x, const std::vector<int64_t>& src_lengths, const Variable& tgt_x,
                            const std::vector<int64_t>& tgt_lengths);

  // The pieces, for decoding. encode: src -> memory (B, S, d_model), the encoder's final norm
  // applied when it has one. decode: tgt (B, T) over that memory -> logits (B, T, vocab), no target padding mask
  // when tgt_lengths is empty (every position real). Without a cache tgt is positions 0 .. T-1;
  // with one it is the new positions P .. P+T-1 after the P the cache holds (tgt_lengths must
  // then be empty), and the result equals those rows of the decode over all P+T positions.
  // With a cache grad mode must be off (std::logic_error otherwise, as in attention.h).
  Variable encode(const Indices& src, const std::vector<int64_t>& src_lengths);
  Variable encode_embedded(const Variable& src_x, const std::vector<int64_t>& src_lengths);
  Variable decode(const Indices& tgt, const Variable& memory, const std::vector<int64_t>& src_lengths,
                  const std::vector<int64_t>& tgt_lengths = {}, Seq2SeqCache* cache = nullptr);
  Variable decode_embedded(const Variable& tgt_x, const Variable& memory, const std::vector<int64_t>& src_lengths,
                           const std::vector<int64_t>& tgt_lengths = {}, Seq2SeqCache* cache = nullptr);
  // An empty cache for `batch` targets over a memory of S positions, in the model's dtype.
  Seq2SeqCache make_cache(int64_t batch, int64_t S) const;
  // h (..., d_model) -> logits (..., tgt_vocab): the head, tied or not (then scaled with scale_logits).
  Variable head(const Variable& h);

  // Options with tgt_vocab resolved.
  const Seq2SeqOptions& options() const { return options_; }
  Embedding& src_embed() { return *src_embed_; }
  Embedding& tgt_embed() { return *tgt_embed_; }
  TransformerEncoder& encoder() { return encoder_; }
  TransformerDecoder& decoder() { return decoder_; }
  // Activation recompute in both stacks (TransformerEncoder::set_recompute): every encoder block
  // and decoder layer keeps only its inputs during a training forward.
  void set_recompute(bool on) {
    encoder_.set_recompute(on);
    decoder_.set_recompute(on);
  }
  // The head's weight (tgt_vocab, d_model): tgt_embed.weight when tied.
  const Variable& head_weight() const;
  DType dtype() const { return tgt_embed_->weight().dtype(); }
  std::string name() const override { return "Seq2Seq"; }

  // The argument checks of forward, for callers that take ids from users (decoding).
  void check_tokens(const char* op, const char* what, const Indices& ids, int64_t vocab) const;
  void check_lengths(const char* op, const char* what, const std::vector<int64_t>& lengths, int64_t B,
                     int64_t T) const;

 private:
  // x (B, T, d_model) looked-up embeddings of positions start .. start+T-1, through the side's
  // input norm when there is one.
  Variable positioned(const Variable& x, int64_t start, LayerNorm* input_norm, const char* op);

  Seq2SeqOptions options_;
  Embedding* src_embed_ = nullptr;
  Embedding* tgt_embed_ = nullptr;  // == src_embed_ when shared
  LearnedPositionalEmbedding* learned_pos_ = nullptr;  // exactly one of the two is set
  SinusoidalPositionalEncoding* sinusoidal_pos_ = nullptr;
  Dropout& dropout_;
  LayerNorm* src_norm_ = nullptr;  // both set with input_norm, else both null
  LayerNorm* tgt_norm_ = nullptr;
  TransformerEncoder& encoder_;
  TransformerDecoder& decoder_;
  Linear* head_ = nullptr;  // null when tied
};

}  // namespace ag
