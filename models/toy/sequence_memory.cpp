#include "attograd/models/toy/sequence_memory.h"

#include <algorithm>

namespace ag {

using namespace memory;

double parameter_count(const SequenceModelOptions& m) {
  const double d = static_cast<double>(m.d_model), ff = static_cast<double>(m.d_ff);
  const double positions = m.positional == PositionalKind::learned ? static_cast<double>(m.max_len) * d : 0;
  const double vocab = static_cast<double>(m.vocab);
  const double final_norm = m.norm_first ? 2 * d : 0;
  return vocab * d + positions + static_cast<double>(m.n_layers) * block_parameters(d, ff, d, d, true, true) + final_norm +
         vocab * d + vocab;
}

double eval_bytes_per_row(const SequenceModelOptions& m, int64_t seq_len) {
  const double t = static_cast<double>(seq_len), d = static_cast<double>(m.d_model);
  // One block at a time: scores and weights (heads x T per token), the feed-forward hidden
  // layer, a few d_model-wide temporaries; then the logits and their softmax.
  const double per_token = 2 * static_cast<double>(m.n_head) * t + static_cast<double>(m.d_ff) + 8 * d +
                           2 * static_cast<double>(m.vocab);
  return t * per_token * kFloat;
}

double training_activation_bytes(const SequenceModelOptions& m, const SequenceTaskOptions& task, bool recompute) {
  const double t = static_cast<double>(task.seq_len), d = static_cast<double>(m.d_model);
  const double tokens = static_cast<double>(task.batch_size) * t;
  const double per_block = 10 * d + 2 * static_cast<double>(m.d_ff) + 2 * static_cast<double>(m.n_head) * t;
  const double per_token = blocks_kept(static_cast<double>(m.n_layers), per_block, d, recompute) + 2 * d +
                           3 * static_cast<double>(m.vocab);
  // Backward holds the gradient of the activations next to them: about half as much again.
  return 1.5 * tokens * per_token * kFloat;
}

int64_t eval_rows_for(const SequenceModelOptions& model, const SequenceTaskOptions& task, int64_t max_rows) {
  const double budget = std::max(training_activation_bytes(model, task, false), kMinEvalBudget);
  const double per_row = eval_bytes_per_row(model, task.seq_len);
  const double fit = per_row > 0 ? budget / per_row : static_cast<double>(max_rows);
  return std::clamp<int64_t>(fit >= static_cast<double>(max_rows) ? max_rows : static_cast<int64_t>(fit), 1,
                             std::max<int64_t>(max_rows, 1));
}

MemoryEstimate estimate_training_memory(const SequenceModelOptions& model, const SequenceTaskOptions& task,
                                        const TrainerOptions& trainer, int64_t eval_sequences) {
  const int64_t rows = eval_rows_for(model, task, std::min<int64_t>(eval_sequences, 256));
  return estimate(parameter_count(model), training_activation_bytes(model, task, trainer.recompute),
                  static_cast<double>(rows) * eval_bytes_per_row(model, task.seq_len), rows, trainer);
}

}  // namespace ag
