// Memory a training run will need, estimated from its options before anything is built, so
// that a model or batch that cannot fit fails at once with a message instead of an allocation
// failure (or the kernel's OOM killer) minutes into the run.
//
//   const MemoryEstimate need = estimate_training_memory(model, task, trainer, 512);  // a family's
//   check_memory_fits(need, available_memory_bytes(), hint);  // std::invalid_argument if it does not
//
// This file holds what every estimate shares: the estimate itself, the arithmetic of a
// transformer's parameters and activations (namespace memory) and the memory available. Each
// model family writes its own estimate with them (models/<family>/<family>_memory.h).
//
// The estimate counts f32 tensors: parameters, their gradients, the optimizer's state (two
// slots for Adam and AdamW, one for SGD with momentum), the activations a training step keeps
// for backward (per block: ~10 d_model + 2 d_ff values per token, plus the attention weights,
// heads x T per token, twice; then the logits three times; of one micro-batch when
// TrainerOptions::grad_accum splits the step; with TrainerOptions::recompute only each block's
// input and one block's activations), and the evaluation's activations
// (no graph: one block's temporaries for the rows evaluated at once). The parameter count is
// exact (tests/train/test_hostile.cpp holds each family's against num_parameters()); the activations are
// counted generously, since the estimate only has to tell a run that fits from one that is
// orders of magnitude too large.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

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

namespace memory {

inline constexpr double kFloat = 4;  // bytes of an f32 value: the Trainer trains in f32
// Evaluation may always use this much, however small a training step's activations are.
inline constexpr double kMinEvalBudget = 256.0 * (1 << 20);

// Bytes of the optimizer's state for `params` bytes of parameters.
double optimizer_bytes(const TrainerOptions& trainer, double params);

// Parameters of one attention of width d whose heads give qk query (and key) features and v
// value features in all (n_head * d_k and n_head * d_v): the four projections, with their
// biases when `bias`.
double attention_parameters(double d, double qk, double v, bool bias);

// Parameters of one pre- or post-norm block of width d: the attention, the feed-forward (with
// its biases when `ff_bias`), two LayerNorms.
double block_parameters(double d, double ff, double qk, double v, bool attn_bias, bool ff_bias);

// Activations a training step keeps per token of one block (generously; see above), with
// `keys` keys per query and qk / v features of queries (and keys) / values over all heads.
double block_activation_values(double d, double ff, double heads, double keys, double qk, double v);

// What a stack of `layers` blocks keeps per token: every block's activations, or with recompute
// (autograd/recompute.h) each block's input (`input` values) and one block's activations, the
// one being run again in backward.
double blocks_kept(double layers, double per_block, double input, bool recompute);

// The estimate of `parameters` f32 values, a step's `activations` bytes (of the whole batch:
// divided here by the micro-batches of trainer.grad_accum), `evaluation` bytes for `eval_rows`
// rows at once, and the optimizer's state the trainer's options imply.
MemoryEstimate estimate(double parameters, double activations, double evaluation, int64_t eval_rows,
                        const TrainerOptions& trainer);

}  // namespace memory

// Memory the system can give this process now: MemAvailable from /proc/meminfo (physical memory
// when that cannot be read), at most the cgroup's limit when one is set.
double available_memory_bytes();

// std::invalid_argument "the run needs about X (breakdown) but only Y is available; ..." when
// `need.total()` exceeds `available`. `hint` ends the message (which options drive the size).
void check_memory_fits(const MemoryEstimate& need, double available, const std::string& hint);

}  // namespace ag
