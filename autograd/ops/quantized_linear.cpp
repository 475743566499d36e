// quantized_linear: y = x W^T + b with W held in a quantized block format (core/quantize.h). A
// forward without a backward: quantized weights serve inference (generation, evaluation), and a
// forward that would need a gradient is refused instead of silently training nothing.
#include <stdexcept>
#include <string>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/nn_ops.h"

namespace ag {

Variable quantized_linear(const Variable& x, const QuantizedMatrix& q, const Variable& weight, const Variable& bias) {
  if (!x.defined() || !weight.defined()) throw std::invalid_argument("quantized_linear: x and weight must be defined");
  const std::string who = weight.name().empty() ? std::string("the weight") : "'" + weight.name() + "'";
  if (weight.dtype() != DType::f32 || weight.dim() != 2 || weight.shape()[0] != q.rows || weight.shape()[1] != q.cols) {
    throw std::invalid_argument(std::string("quantized_linear: ") + who + " is " + weight.shape().str() + " " +
                                dtype_name(weight.dtype()) + " but its " + format_name(q.format) + " form is (" + std::to_string(q.rows) + ", " +
                                std::to_string(q.cols) + ") of a float32 weight; quantize after converting or loading");
  }
  if (grad_enabled() && (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()))) {
    throw std::logic_error("quantized_linear: " + who +
                           " is quantized to " + format_name(q.format) + " for inference and has no gradient; run the forward under "
                           "NoGradGuard (generation, evaluation), or train the float32 model");
  }
  return Variable(kernels::quantized_linear(x.value(), q, bias.defined() ? bias.value() : Tensor()));
}

}  // namespace ag
