// Memory a training run will need, estimated from its options before anything is built, so
// that a model or batch that cannot fit fails at once with a message instead of an allocation
// failure (or the kernel's OOM killer) minutes into the run.
//
//   const MemoryEstimate need = estimate_training_memory(model, task, trainer, 512);
//   check_memory_fits(need, available_memory_bytes());   // std::invalid_argument if it does not
//
// The estimate counts f32 tensors: parameters, their gradients, the optimizer's state (two
// slots for Adam and AdamW, one for SGD with momentum), the activations a training step keeps
// for backward (per block: ~10 d_model + 2 d_ff values per token, plus the attention weights,
// heads x T per token, twice; then the logits three times; of one micro-batch when
// TrainerOptions::grad_accum splits the step; with TrainerOptions::recompute only each block's
// input and one block's activations), and the evaluation's activations
// (no graph: one block's temporaries for the rows evaluated at once). The parameter count is
// exact (tests/train/test_hostile.cpp holds it against num_parameters()); the activations are
// counted generously, since the estimate only has to tell a run that fits from one that is
// orders of magnitude too large.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "attograd/models/gpt.h"
#include "attograd/models/seq2seq.h"
#include "attograd/models/sequence_model.h"
#include "attograd/train/data/seq2seq_tasks.h"
#include "attograd/train/data/sequence_tasks.h"
#include "attograd/train/trainer.h"

namespace ag {

struct MemoryEstimate {
  double parameters = 0;       // bytes
  double gradients = 0;
  double optimizer_state = 0;
  double activations = 0;      // one training step's forward + backward
  double evaluation = 0;       // one chunk of held-out rows
  int64_t eval_rows = 0;       // rows evaluated at once (see eval_rows_for)
  double held_out = 0;         // a held-out set kept for the whole run (the seq2seq job's)

  // Evaluation runs after a step's activations are freed: the two never coexist.
  double total() const {
    return parameters + gradients + optimizer_state + held_out + std::max(activations, evaluation);
  }
  // "parameters 1.2 MiB, gradients 1.2 MiB, ...": the breakdown for messages.
  std::string breakdown() const;
};

// Bytes of evaluating one held-out row (no graph kept), and of a training step's activations.
double eval_bytes_per_row(const SequenceModelOptions& model, int64_t seq_len);
double training_activation_bytes(const SequenceModelOptions& model, const SequenceTaskOptions& task,
                                 bool recompute = false);

// How many held-out rows to evaluate at once: at most `max_rows`, and no more than fit in the
// larger of a training step's activations and 256 MiB (at least one row).
int64_t eval_rows_for(const SequenceModelOptions& model, const SequenceTaskOptions& task, int64_t max_rows);

// Parameters of each model kind, counted from its options without building it (exact:
// tests/train/test_hostile.cpp holds each against num_parameters()).
double parameter_count(const SequenceModelOptions& model);
double parameter_count(const GPTOptions& model);
double parameter_count(const Seq2SeqOptions& model);

// One estimate per model kind, from the options alone: each program calls its own before it
// builds anything (a resumed run from the checkpoint's metadata).
MemoryEstimate estimate_training_memory(const SequenceModelOptions& model, const SequenceTaskOptions& task,
                                        const TrainerOptions& trainer, int64_t eval_sequences);
// `batch` windows of block_size tokens per step.
MemoryEstimate estimate_training_memory(const GPTOptions& model, int64_t batch, const TrainerOptions& trainer);
// Sources and targets counted at the model's max_len (padding included).
MemoryEstimate estimate_training_memory(const Seq2SeqOptions& model, const Seq2SeqTaskOptions& task,
                                        const TrainerOptions& trainer, int64_t eval_sequences);

// Memory the system can give this process now: MemAvailable from /proc/meminfo (physical memory
// when that cannot be read), at most the cgroup's limit when one is set.
double available_memory_bytes();

// std::invalid_argument "the run needs about X (breakdown) but only Y is available; ..." when
// `need.total()` exceeds `available`. `hint` ends the message (which options drive the size).
void check_memory_fits(const MemoryEstimate& need, double available, const std::string& hint);

}  // namespace ag
