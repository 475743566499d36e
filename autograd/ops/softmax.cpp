// Softmax and log-softmax along an axis, fused: backward reads only the saved output.
#include "attograd/autograd/ops.h"
#include "attograd/core/kernels.h"

namespace ag {

Variable softmax(const Variable& x, int64_t axis) {
  Tensor y = kernels::softmax(x.value(), axis);
  return make_result("softmax", y, {x}, [y, axis](const Tensor& g, GradSink& grads) {
    grads.add(0, kernels::softmax_backward(y, g, axis));
  });
}

Variable log_softmax(const Variable& x, int64_t axis) {
  Tensor y = kernels::log_softmax(x.value(), axis);
  return make_result("log_softmax", y, {x}, [y, axis](const Tensor& g, GradSink& grads) {
    grads.add(0, kernels::log_softmax_backward(y, g, axis));
  });
}

}  // namespace ag
