// Reductions. Their backward spreads the output gradient back over the reduced axes: the
// gradient is viewed with the reduced axes kept (size 1) and broadcast to the input's shape.
#include "attograd/autograd/ops.h"
#include "attograd/core/kernels.h"

namespace ag {

namespace {

// g (reduced shape) -> a stride-0 view of the input's shape.
Tensor spread(const Tensor& g, const Shape& input_shape, const std::vector<int64_t>& axes) {
  return g.reshape(kernels::reduced_shape(input_shape, axes, true)).expand(input_shape);
}

}  // namespace

Variable sum(const Variable& x, const std::vector<int64_t>& axes_in, bool keepdim) {
  const std::vector<int64_t> axes = kernels::reduction_axes(axes_in, x.shape(), "sum");
  const Shape in_shape = x.shape();
  return make_result("sum", kernels::sum(x.value(), axes, keepdim), {x}, [in_shape, axes](const Tensor& g, GradSink& grads) {
    grads.add(0, spread(g, in_shape, axes));
  });
}

Variable mean(const Variable& x, const std::vector<int64_t>& axes_in, bool keepdim) {
  const std::vector<int64_t> axes = kernels::reduction_axes(axes_in, x.shape(), "mean");
  const Shape in_shape = x.shape();
  int64_t count = 1;
  for (int64_t a : axes) count *= in_shape[a];
  return make_result("mean", kernels::mean(x.value(), axes, keepdim), {x},
                     [in_shape, axes, count](const Tensor& g, GradSink& grads) {
                       grads.add(0, spread(kernels::affine(g, 1.0 / static_cast<double>(count), 0.0), in_shape, axes));
                     });
}

Variable max(const Variable& x, const std::vector<int64_t>& axes_in, bool keepdim) {
  const std::vector<int64_t> axes = kernels::reduction_axes(axes_in, x.shape(), "max");
  Tensor y = kernels::amax(x.value(), axes, keepdim);
  const Tensor x_val = x.value();
  return make_result("max", y, {x}, [x_val, y, axes](const Tensor& g, GradSink& grads) {
    const Shape& in_shape = x_val.shape();
    // The gradient goes to the elements equal to the maximum, split evenly among ties.
    const Tensor hit = kernels::binary(kernels::BinaryOp::equal, x_val, spread(y, in_shape, axes));
    const Tensor ties = kernels::sum(hit, axes, true);
    const Tensor share = kernels::div(g.reshape(ties.shape()), ties);
    grads.add(0, kernels::mul(hit, share));
  });
}

}  // namespace ag
