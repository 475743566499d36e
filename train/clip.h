// Gradient clipping by the global norm, done between backward and the optimizer step:
//
//   double norm = clip_grad_norm(model.named_parameters(), 1.0);
#pragma once

#include "attograd/autograd/variable.h"

namespace ag {

// Rescales the gradients of `params` in place so that their total L2 norm (over all elements of
// all defined gradients) is at most max_norm, as torch.nn.utils.clip_grad_norm_ does: every
// gradient is multiplied by max_norm / (norm + 1e-6) when that factor is below 1. Returns the
// norm before clipping. Parameters without a gradient are skipped. A non-finite norm throws
// std::runtime_error when error_if_nonfinite, and otherwise scales as PyTorch does (the NaN
// spreads, so the caller sees it in the loss). max_norm must be positive.
double clip_grad_norm(const NamedVariables& params, double max_norm, bool error_if_nonfinite = false);

// The total L2 norm of the defined gradients, without changing them.
double grad_norm(const NamedVariables& params);

}  // namespace ag
