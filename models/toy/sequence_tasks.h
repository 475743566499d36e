// Toy sequence tasks, generated on the fly: no data to download, and every batch is a pure
// function of (seed, batch index), so a resumed run sees exactly the batches it would have seen.
//
// Format (made for an encoder-only transformer that predicts one token per position):
//   inputs  (B, T): tokens drawn uniformly from [0, vocab_size)
//   targets (B, T): the same sequence transformed, tokens in [0, vocab_size)
//     copy     targets[t] = inputs[t]
//     reverse  targets[t] = inputs[T - 1 - t]
//     sort     targets = inputs sorted ascending
//     shift    targets[(t + k) mod T] = inputs[t]   (rotation right by k, like numpy.roll)
// The model maps inputs to logits (B, T, V) and is trained with cross_entropy(logits, targets).
//
// Training batches come from `seed`, held-out batches from `eval_seed` in a separate stream
// domain, so evaluation data never shares a random stream with training data even when the two
// seeds are equal. The default eval_seed is a fixed constant: runs with different training
// seeds are evaluated on the same held-out sequences.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/core/tensor.h"
#include "attograd/train/metrics.h"

namespace ag {

enum class SequenceTaskKind { copy, reverse, sort, shift };
const char* sequence_task_name(SequenceTaskKind kind);  // "copy", "reverse", "sort", "shift"
// Inverse of task_name; std::invalid_argument listing the choices otherwise.
SequenceTaskKind parse_sequence_task_kind(const std::string& name);

// Upper bounds shared by the command line and checkpoint metadata.
struct SequenceTaskLimits {
  static constexpr int64_t vocab_size = int64_t{1} << 20;
  static constexpr int64_t seq_len = 4096;
  static constexpr int64_t batch_size = int64_t{1} << 16;
};

struct SequenceTaskOptions {
  SequenceTaskKind kind = SequenceTaskKind::reverse;
  int64_t vocab_size = 16;  // >= 2
  int64_t seq_len = 16;     // >= 1 (>= 2 for shift)
  int64_t batch_size = 32;  // >= 1
  int64_t shift = 1;        // shift task only: rotation k in [1, seq_len)
  uint64_t seed = 0;        // training batches
  uint64_t eval_seed = kDefaultEvalSeed;  // held-out batches
};

// One batch: inputs and targets, both (batch_size, seq_len).
struct SequenceBatch {
  Indices inputs;
  Indices targets;
};

// Throws std::invalid_argument naming the option and its value (vocab_size < 2, seq_len < 1,
// batch_size < 1, shift outside [1, seq_len)).
void validate(const SequenceTaskOptions& options);

class SequenceTask {
 public:
  explicit SequenceTask(const SequenceTaskOptions& options);  // validates them

  // Training batch number `index` (the trainer's data position).
  SequenceBatch train_batch(uint64_t index) const;
  // Held-out batch number `index`.
  SequenceBatch eval_batch(uint64_t index) const;
  // The target of one input sequence of length seq_len.
  std::vector<int64_t> transform(std::span<const int64_t> input) const;

  const SequenceTaskOptions& options() const { return options_; }

 private:
  SequenceBatch make_batch(uint64_t seed, uint64_t index, uint64_t domain) const;
  SequenceTaskOptions options_;
};

}  // namespace ag
