// Losses composed from differentiable primitives: their gradients come from the ops' own
// backward passes, which the gradient checks cover.
#include "attograd/train/losses.h"

#include <stdexcept>
#include <string>

#include "attograd/autograd/ops.h"

namespace ag {

Variable mse_loss(const Variable& input, const Variable& target, Reduction reduction) {
  if (!input.defined() || !target.defined()) throw std::invalid_argument("mse_loss: input or target is undefined");
  if (input.shape() != target.shape() || input.dtype() != target.dtype()) {
    throw std::invalid_argument("mse_loss: input " + input.shape().str() + " " + dtype_name(input.dtype()) +
                                " and target " + target.shape().str() + " " + dtype_name(target.dtype()) +
                                " must have the same shape and dtype");
  }
  const Variable diff = sub(input, target);
  const Variable squared = mul(diff, diff);
  switch (reduction) {
    case Reduction::mean: return mean(squared);
    case Reduction::sum: return sum(squared);
    case Reduction::none: return squared;
  }
  throw std::invalid_argument("mse_loss: unknown reduction");
}

}  // namespace ag
