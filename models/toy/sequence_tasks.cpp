#include "attograd/models/toy/sequence_tasks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/format.h"
#include "attograd/core/kernels.h"
#include "attograd/core/rng.h"

namespace ag {

namespace {

constexpr uint64_t kTrainDomain = 0;
constexpr uint64_t kEvalDomain = 1;

using Kind = SequenceTaskKind;
constexpr Named<Kind> kSequenceTaskNames[] = {
    {Kind::copy, "copy"}, {Kind::reverse, "reverse"}, {Kind::sort, "sort"}, {Kind::shift, "shift"}};

}  // namespace

const char* sequence_task_name(SequenceTaskKind kind) { return name_of(kSequenceTaskNames, kind); }

SequenceTaskKind parse_sequence_task_kind(const std::string& name) { return named(kSequenceTaskNames, name, "task"); }

void validate(const SequenceTaskOptions& o) {
  const std::string task = std::string("task ") + sequence_task_name(o.kind) + ": ";
  check_in_range(task, "vocab_size", o.vocab_size, 2, SequenceTaskLimits::vocab_size);
  check_in_range(task, "seq_len", o.seq_len, 1, SequenceTaskLimits::seq_len);
  check_in_range(task, "batch_size", o.batch_size, 1, SequenceTaskLimits::batch_size);
  if (o.kind == SequenceTaskKind::shift && (o.shift < 1 || o.shift >= o.seq_len)) {
    throw std::invalid_argument(task + "shift " + std::to_string(o.shift) + " is out of range [1, " +
                                std::to_string(o.seq_len) + ") for seq_len " + std::to_string(o.seq_len) +
                                " (a rotation by 0 is the copy task)");
  }
}

SequenceTask::SequenceTask(const SequenceTaskOptions& options) : options_(options) { validate(options); }

std::vector<int64_t> SequenceTask::transform(std::span<const int64_t> input) const {
  const int64_t n = options_.seq_len;
  if (static_cast<int64_t>(input.size()) != n) {
    throw std::invalid_argument(std::string("task ") + sequence_task_name(options_.kind) + ": a sequence of length " +
                                std::to_string(input.size()) + " given, seq_len is " + std::to_string(n));
  }
  std::vector<int64_t> out(input.begin(), input.end());
  switch (options_.kind) {
    case SequenceTaskKind::copy: break;
    case SequenceTaskKind::reverse: std::reverse(out.begin(), out.end()); break;
    case SequenceTaskKind::sort: std::sort(out.begin(), out.end()); break;
    case SequenceTaskKind::shift:
      for (int64_t t = 0; t < n; ++t) out[static_cast<size_t>((t + options_.shift) % n)] = input[static_cast<size_t>(t)];
      break;
  }
  return out;
}

SequenceBatch SequenceTask::make_batch(uint64_t seed, uint64_t index, uint64_t domain) const {
  // One random stream per batch, keyed by (seed, index, domain) through the counter-based
  // generator: no state carries from one batch to the next.
  Generator gen(seed);
  gen.set_state(GeneratorState{seed, index, domain});
  const uint64_t key = gen.next_stream();
  const int64_t b = options_.batch_size, t = options_.seq_len;
  const uint64_t vocab = static_cast<uint64_t>(options_.vocab_size);
  SequenceBatch batch;
  batch.inputs.shape = Shape{b, t};
  batch.targets.shape = Shape{b, t};
  batch.inputs.data.resize(static_cast<size_t>(b * t));
  batch.targets.data.reserve(static_cast<size_t>(b * t));
  for (int64_t i = 0; i < b * t; ++i) {
    // The modulo bias is below vocab / 2^64: invisible for any vocabulary a toy task uses.
    batch.inputs.data[static_cast<size_t>(i)] = static_cast<int64_t>(Generator::bits(key, static_cast<uint64_t>(i)) % vocab);
  }
  for (int64_t row = 0; row < b; ++row) {
    const std::span<const int64_t> in(batch.inputs.data.data() + row * t, static_cast<size_t>(t));
    const std::vector<int64_t> out = transform(in);
    batch.targets.data.insert(batch.targets.data.end(), out.begin(), out.end());
  }
  return batch;
}

SequenceBatch SequenceTask::train_batch(uint64_t index) const { return make_batch(options_.seed, index, kTrainDomain); }

SequenceBatch SequenceTask::eval_batch(uint64_t index) const { return make_batch(options_.eval_seed, index, kEvalDomain); }

}  // namespace ag
