// Loss functions. Each returns a Variable, so `loss.backward()` reaches the model.
//
//   cross_entropy(logits, targets, options)   logits: (..., C), targets: (...) -> scalar
//       log-softmax and NLL fused in one op (autograd/nn_ops.h, re-exported here), with
//       ignore_index, label_smoothing and mean/sum/none reduction as in PyTorch. For the
//       sequence tasks: logits (B, T, V), targets (B, T).
//   mse_loss(input, target, reduction)        input, target: same shape -> scalar (or that shape)
//       mean, sum or elementwise squared error; both operands may require grad.
#pragma once

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/variable.h"

namespace ag {

// cross_entropy, CrossEntropyOptions and Reduction come with the include of autograd/nn_ops.h
// above, so training code includes train/losses.h only.

// (input - target)^2, then averaged (mean), summed (sum) or returned as is (none).
// input and target must have the same shape and dtype (no silent broadcasting: PyTorch warns
// there because it is almost always a bug); std::invalid_argument names both shapes otherwise.
Variable mse_loss(const Variable& input, const Variable& target, Reduction reduction = Reduction::mean);

}  // namespace ag
