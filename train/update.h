// One checked optimizer update, the step the training loop (train/trainer.h) takes after the
// job's forward pass:
//
//   const StepResult r = checked_update(loss, params, optimizer, lr, guard, update);
//
// backward from the loss, the gradient norm (clipped when clip_norm > 0), the checks, then the
// update at lr. With a DataParallel (a run over several processes) the loss is this rank's
// shard's: the reported loss is the mean over ranks, and the gradients are averaged over ranks
// during backward, so the norm, the checks and the update are the same on every rank. A diverged step throws TrainingDiverged before any parameter changes, with a
// message that names the update, what went wrong and the likely causes.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "attograd/autograd/variable.h"
#include "attograd/train/clip.h"
#include "attograd/train/dist/data_parallel.h"
#include "attograd/train/optim.h"

namespace ag {

// A run whose loss or gradient stopped being usable: a non-finite loss or gradient norm, or a
// loss above kDivergenceFactor times the run's starting loss (the first update's loss, or ln V
// if that is larger). Thrown before the update is applied and before such parameters are saved.
class TrainingDiverged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
inline constexpr double kDivergenceFactor = 10;

struct StepResult {
  double loss = 0;       // of the batch, before the update
  double grad_norm = 0;  // before clipping
  double lr = 0;         // used by the update
};

// What a divergence message says about the run, and the run's starting loss.
struct DivergenceGuard {
  std::string trainer;          // "Trainer (gpt)": the message's first words
  double peak_lr = 0;           // the configured learning rate, clip norm and warm-up
  double clip_norm = 0;
  int64_t warmup_steps = 0;
  int64_t vocab = 1;            // ln(vocab) is the loss of a uniform guess
  std::string checkpoint_path;  // empty: the run writes none
  int64_t last_saved_step = -1;  // the step in the checkpoint, -1 before the first save
  double first_loss = 0;        // set by the first update (0 before it); checkpointed by the trainers

  // kDivergenceFactor times the larger of first_loss and ln(vocab).
  double limit() const;
  [[noreturn]] void diverged(int64_t update, const std::string& what, double grad_norm, double lr) const;
};

// `update` is the 1-based number of the update being made (for the messages). With gradient
// accumulation, `loss` is the last micro-batch's and `earlier` the sum of the losses of the
// micro-batches whose backward has already run (their gradients are in place): the update's
// loss is their sum.
StepResult checked_update(const Variable& loss, const NamedVariables& params, Optimizer& optimizer, double lr,
                          DivergenceGuard& guard, int64_t update, DataParallel* data_parallel = nullptr,
                          double earlier = 0);

}  // namespace ag
