#include "attograd/train/memory.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "attograd/core/storage.h"

namespace ag {

namespace memory {

double optimizer_bytes(const TrainerOptions& trainer, double params) {
  switch (trainer.optimizer) {
    case OptimizerKind::sgd: return trainer.momentum > 0 ? params : 0;
    case OptimizerKind::adam:
    case OptimizerKind::adamw: return 2 * params;
  }
  return 2 * params;
}

double attention_parameters(double d, double qk, double v, bool bias) {
  const double b = bias ? 1 : 0;
  return 2 * (d * qk + b * qk) + (d * v + b * v) + (v * d + b * d);
}

double block_parameters(double d, double ff, double qk, double v, bool attn_bias, bool ff_bias) {
  const double b = ff_bias ? 1 : 0;
  return attention_parameters(d, qk, v, attn_bias) + 2 * d * ff + b * (ff + d) + 4 * d;
}

double block_activation_values(double d, double ff, double heads, double keys, double qk, double v) {
  return 6 * d + 2 * qk + 2 * v + 2 * ff + 2 * heads * keys;
}

double blocks_kept(double layers, double per_block, double input, bool recompute) {
  return recompute ? layers * input + per_block : layers * per_block;
}

MemoryEstimate estimate(double parameters, double activations, double evaluation, int64_t eval_rows,
                        const TrainerOptions& trainer) {
  MemoryEstimate e;
  e.parameters = parameters * kFloat;
  e.gradients = e.parameters;
  e.optimizer_state = optimizer_bytes(trainer, e.parameters);
  e.activations = activations / static_cast<double>(trainer.grad_accum);  // one micro-batch's
  e.evaluation = evaluation;
  e.eval_rows = eval_rows;
  return e;
}

}  // namespace memory

std::string MemoryEstimate::breakdown() const {
  std::ostringstream os;
  os << "parameters " << format_bytes(parameters) << ", gradients " << format_bytes(gradients) << ", optimizer state "
     << format_bytes(optimizer_state) << ", activations " << format_bytes(activations) << ", evaluation "
     << format_bytes(evaluation) << " (" << eval_rows << (eval_rows == 1 ? " row" : " rows") << " at once)";
  if (held_out > 0) os << ", held-out set " << format_bytes(held_out);
  return os.str();
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
