// What a classifier of tokens got right: the loss, the share of correct tokens and of sequences
// with every token correct, counted over batches of logits against their targets. The toy tasks,
// the encoder-decoder and anything else that predicts one token per position report these.
#pragma once

#include <cstdint>

#include "attograd/core/indices.h"
#include "attograd/core/tensor.h"

namespace ag {

// The seed of a task's held-out batches unless its options say otherwise: one for every task, so
// that the held-out set stays the same whatever training seed a run is given.
inline constexpr uint64_t kDefaultEvalSeed = 0x5EEDE7A1u;

// Evaluation counts that add up over batches; the rates are taken at the end.
struct SequenceMetrics {
  double loss_sum = 0;             // sum over tokens of -log softmax(logits)[target]
  int64_t tokens = 0;
  int64_t correct_tokens = 0;      // argmax == target
  int64_t sequences = 0;
  int64_t correct_sequences = 0;   // every token of the sequence correct

  double loss() const;               // mean cross-entropy per token
  double token_accuracy() const;     // in [0, 1]
  double sequence_accuracy() const;  // in [0, 1]
  SequenceMetrics& operator+=(const SequenceMetrics& other);
};

// logits: (B, T, V) f32 or f64, targets: (B, T) in [0, V). Computed without building a graph.
// The argmax takes the first of tied maxima. std::invalid_argument names both shapes (or the
// bad target) on a mismatch.
SequenceMetrics sequence_metrics(const Tensor& logits, const Indices& targets);

// The predicted tokens: argmax over the last axis, logits (B, T, V) -> (B, T).
Indices predict_tokens(const Tensor& logits);

}  // namespace ag
