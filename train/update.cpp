#include "attograd/train/update.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "attograd/core/format.h"

namespace ag {

double DivergenceGuard::limit() const {
  return kDivergenceFactor * std::max(first_loss, std::log(static_cast<double>(vocab)));
}

void DivergenceGuard::diverged(int64_t update, const std::string& what, double grad_norm, double lr) const {
  std::ostringstream os;
  os << trainer << ": training diverged at update " << update << ": " << what << ", gradient norm " << grad_norm
     << ", learning rate " << lr << ". Likely causes: a learning rate too high for this model (lr " << peak_lr
     << "), too short a warm-up (warmup_steps " << warmup_steps << "), "
     << (clip_norm > 0 ? "a clipping norm too large (clip_norm " + format_number(clip_norm) + ")"
                       : std::string("no gradient clipping (clip_norm 0)"))
     << ". This update was not applied and nothing was saved after it; ";
  if (checkpoint_path.empty()) {
    os << "this run writes no checkpoint";
  } else if (last_saved_step >= 0) {
    os << "the checkpoint '" << checkpoint_path << "' keeps step " << last_saved_step << ", the last good state";
  } else {
    os << "no checkpoint was saved before it";
  }
  throw TrainingDiverged(os.str());
}

StepResult checked_update(const Variable& loss, const NamedVariables& params, Optimizer& optimizer, double lr,
                          DivergenceGuard& guard, int64_t update, DataParallel* data_parallel, double earlier) {
  StepResult r;
  const double local = earlier + loss.item();
  r.loss = data_parallel != nullptr ? data_parallel->mean(local) : local;
  r.lr = lr;
  // Backward first so that a diverged step's message has its gradient norm; nothing is applied
  // before every check has passed.
  if (data_parallel != nullptr) data_parallel->backward(loss);
  else loss.backward();
  r.grad_norm = guard.clip_norm > 0 ? clip_grad_norm(params, guard.clip_norm) : grad_norm(params);
  if (!std::isfinite(r.loss)) guard.diverged(update, "the loss is " + format_number(r.loss), r.grad_norm, lr);
  if (guard.first_loss == 0) guard.first_loss = r.loss;
  if (r.loss > guard.limit()) {
    guard.diverged(update,
                   "the loss " + format_number(r.loss) + " is above " + format_number(guard.limit()) + " (" +
                       format_number(kDivergenceFactor) + " times the starting loss)",
                   r.grad_norm, lr);
  }
  if (!std::isfinite(r.grad_norm)) guard.diverged(update, "the gradient norm is " + format_number(r.grad_norm), r.grad_norm, lr);
  optimizer.set_lr(lr);
  optimizer.step();
  return r;
}

}  // namespace ag
