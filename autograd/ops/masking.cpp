// masked_fill and where: select between values by a condition tensor. The condition is data,
// not a variable: it gets no gradient, and the gradient of each branch is the upstream gradient
// where that branch was chosen and zero elsewhere.
#include <stdexcept>
#include <string>

#include "attograd/autograd/ops.h"
#include "attograd/core/kernels.h"

namespace ag {

namespace {

Tensor as_condition(const Tensor& cond, DType dtype, const char* op) {
  if (!cond.defined()) throw std::invalid_argument(std::string(op) + ": the mask tensor is undefined");
  return cond.to(dtype);
}

}  // namespace

Variable masked_fill(const Variable& x, const Tensor& mask_in, double value) {
  const Tensor mask = as_condition(mask_in, x.dtype(), "masked_fill");
  if (!broadcastable_to(mask.shape(), x.shape())) {
    throw std::invalid_argument("masked_fill: mask of shape " + mask.shape().str() +
                                " does not broadcast to the input's shape " + x.shape().str());
  }
  const Tensor fill = scalar(value, x.dtype());
  Tensor out = kernels::where(mask, fill, x.value());
  return make_result("masked_fill", std::move(out), {x}, [mask](const Tensor& g, GradSink& grads) {
    grads.add(0, kernels::where(mask, scalar(0.0, g.dtype()), g));
  });
}

Variable where(const Tensor& cond_in, const Variable& a_in, const Variable& b_in) {
  if (a_in.dtype() != b_in.dtype()) {
    throw std::invalid_argument(std::string("where: dtypes differ: a=") + dtype_name(a_in.dtype()) + " " +
                                a_in.shape().str() + " b=" + dtype_name(b_in.dtype()) + " " + b_in.shape().str());
  }
  const Tensor cond = as_condition(cond_in, a_in.dtype(), "where");
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a_in.shape(), "where"), b_in.shape(), "where");
  const Variable a = broadcast_to(a_in, shape);
  const Variable b = broadcast_to(b_in, shape);
  Tensor out = kernels::where(cond, a.value(), b.value());
  return make_result("where", std::move(out), {a, b}, [cond](const Tensor& g, GradSink& grads) {
    const Tensor zero = scalar(0.0, g.dtype());
    if (grads.wants(0)) grads.add(0, kernels::where(cond, g, zero));
    if (grads.wants(1)) grads.add(1, kernels::where(cond, zero, g));
  });
}

}  // namespace ag
