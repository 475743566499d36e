// SequenceModel: the encoder-only transformer the toy tasks train. It predicts one token per
// position, so every task (copy, reverse, sort, shift) is T classifications over the vocabulary:
//
//   ids (B, T) --embed--> (B, T, d_model) --+ positions--> dropout --> TransformerEncoder
//             --> head (Linear d_model -> vocab) --> logits (B, T, vocab)
//
//   children: embed (Embedding vocab x d_model), pos (LearnedPositionalEmbedding, parameter
//             pos.weight (max_len, d_model); or SinusoidalPositionalEncoding, buffer pos.pe),
//             dropout, encoder (blocks.0 ... and, pre-norm, norm), head
//
// Without a mask every position sees every other one: the tasks need the whole input to fill
// any output position (reverse reads the mirrored token, sort counts all of them). A mask (e.g.
// key padding for variable lengths) goes to every block unchanged.
//
// Parameters are drawn from default_generator() at construction: seed it first
// (ag::manual_seed) for a reproducible initialisation.
#pragma once

#include <cstdint>
#include <string>

#include "attograd/core/indices.h"
#include "attograd/layers/attention_mask.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/embedding.h"
#include "attograd/layers/linear.h"
#include "attograd/layers/module.h"
#include "attograd/layers/positional.h"
#include "attograd/layers/transformer.h"

namespace ag {

struct SequenceModelOptions {
  int64_t vocab = 16;     // input tokens and output classes
  int64_t max_len = 16;   // longest sequence the positional table covers
  int64_t d_model = 64;
  int64_t n_head = 4;     // must divide d_model
  int64_t d_ff = 256;
  int64_t n_layers = 2;
  bool norm_first = true;  // pre-norm trains faster and more stably on the toy tasks
  double dropout = 0.0;    // after the positional sum and inside every block
  PositionalKind positional = PositionalKind::learned;
};

// The upper bounds of the options: the transformers' (layers/transformer.h).
using SequenceModelLimits = TransformerLimits;

// Throws std::invalid_argument naming the first bad option and its value (every size must lie
// in [1, SequenceModelLimits]).
void validate(const SequenceModelOptions& options);

class SequenceModel : public Module {
 public:
  explicit SequenceModel(const SequenceModelOptions& options);

  // ids: (B, T) in [0, vocab), T <= max_len -> logits (B, T, vocab)
  Variable forward(const Indices& ids, const AttentionMask& mask = {});
  Variable operator()(const Indices& ids, const AttentionMask& mask = {}) { return forward(ids, mask); }
  // The same model after the token lookup: x: (B, T, d_model) embedded tokens -> (B, T, vocab).
  // Lets a caller feed its own embeddings (and a gradient check differentiate w.r.t. them).
  Variable forward_embedded(const Variable& x, const AttentionMask& mask = {});

  const SequenceModelOptions& options() const { return options_; }
  Embedding& embed() { return embed_; }
  TransformerEncoder& encoder() { return encoder_; }
  Linear& head() { return head_; }
  std::string name() const override { return "SequenceModel"; }

 private:
  SequenceModelOptions options_;
  Embedding& embed_;
  LearnedPositionalEmbedding* learned_pos_ = nullptr;  // exactly one of the two is set
  SinusoidalPositionalEncoding* sinusoidal_pos_ = nullptr;
  Dropout& dropout_;
  TransformerEncoder& encoder_;
  Linear& head_;
};

}  // namespace ag
