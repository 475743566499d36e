#include "attograd/train/memory.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "attograd/core/storage.h"

namespace ag {

namespace {

constexpr double kFloat = 4;  // bytes of an f32 value: the Trainer trains in f32
constexpr double kMinEvalBudget = 256.0 * (1 << 20);

double parameter_count(const SequenceModelOptions& m) {
  const double d = static_cast<double>(m.d_model), ff = static_cast<double>(m.d_ff);
  const double block = 4 * (d * d + d)          // q, k, v and output projections
                       + 2 * d * ff + ff + d    // feed-forward
                       + 4 * d;                 // two LayerNorms (weight and bias)
  const double positions = m.positional == PositionalKind::learned ? static_cast<double>(m.max_len) * d : 0;
  const double vocab = static_cast<double>(m.vocab);
  const double final_norm = m.norm_first ? 2 * d : 0;
  return vocab * d + positions + static_cast<double>(m.n_layers) * block + final_norm + vocab * d + vocab;
}

}  // namespace

std::string MemoryEstimate::breakdown() const {
  std::ostringstream os;
  os << "parameters " << format_bytes(parameters) << ", gradients " << format_bytes(gradients) << ", optimizer state "
     << format_bytes(optimizer_state) << ", activations " << format_bytes(activations) << ", evaluation "
     << format_bytes(evaluation) << " (" << eval_rows << (eval_rows == 1 ? " row" : " rows") << " at once)";
  return os.str();
}

double eval_bytes_per_row(const SequenceModelOptions& m, int64_t seq_len) {
  const double t = static_cast<double>(seq_len), d = static_cast<double>(m.d_model);
  // One block at a time: scores and weights (heads x T per token), the feed-forward hidden
  // layer, a few d_model-wide temporaries; then the logits and their softmax.
  const double per_token = 2 * static_cast<double>(m.n_head) * t + static_cast<double>(m.d_ff) + 8 * d +
                           2 * static_cast<double>(m.vocab);
  return t * per_token * kFloat;
}

double training_activation_bytes(const SequenceModelOptions& m, const SequenceTaskOptions& task) {
  const double t = static_cast<double>(task.seq_len), d = static_cast<double>(m.d_model);
  const double tokens = static_cast<double>(task.batch_size) * t;
  const double per_block = 10 * d + 2 * static_cast<double>(m.d_ff) + 2 * static_cast<double>(m.n_head) * t;
  const double per_token = static_cast<double>(m.n_layers) * per_block + 2 * d + 3 * static_cast<double>(m.vocab);
  // Backward holds the gradient of the activations next to them: about half as much again.
  return 1.5 * tokens * per_token * kFloat;
}

int64_t eval_rows_for(const SequenceModelOptions& model, const SequenceTaskOptions& task, int64_t max_rows) {
  const double budget = std::max(training_activation_bytes(model, task), kMinEvalBudget);
  const double per_row = eval_bytes_per_row(model, task.seq_len);
  const double fit = per_row > 0 ? budget / per_row : static_cast<double>(max_rows);
  return std::clamp<int64_t>(fit >= static_cast<double>(max_rows) ? max_rows : static_cast<int64_t>(fit), 1,
                             std::max<int64_t>(max_rows, 1));
}

MemoryEstimate estimate_training_memory(const SequenceModelOptions& model, const SequenceTaskOptions& task,
                                        const TrainerOptions& trainer, int64_t eval_sequences) {
  MemoryEstimate e;
  const double params = parameter_count(model) * kFloat;
  e.parameters = params;
  e.gradients = params;
  switch (trainer.optimizer) {
    case OptimizerKind::sgd: e.optimizer_state = trainer.momentum > 0 ? params : 0; break;
    case OptimizerKind::adam:
    case OptimizerKind::adamw: e.optimizer_state = 2 * params; break;
  }
  e.activations = training_activation_bytes(model, task);
  e.eval_rows = eval_rows_for(model, task, std::min<int64_t>(eval_sequences, 256));
  e.evaluation = static_cast<double>(e.eval_rows) * eval_bytes_per_row(model, task.seq_len);
  return e;
}

double available_memory_bytes() {
  double available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      available = kib * 1024;
      break;
    }
  }
  if (available <= 0) {
    available = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  }
  // A container's limit is lower than the machine's memory.
  std::ifstream limit_file("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (limit_file >> limit && limit != "max") {
    try {
      available = std::min(available, std::stod(limit));
    } catch (const std::exception&) {
      // an unreadable limit leaves the machine's figure
    }
  }
  return available;
}

void check_memory_fits(const MemoryEstimate& need, double available, const std::string& hint) {
  if (need.total() <= available) return;
  throw std::invalid_argument("the run needs about " + format_bytes(need.total()) + " of memory (" + need.breakdown() +
                              ") but this machine has " + format_bytes(available) + " available; " + hint);
}

}  // namespace ag
