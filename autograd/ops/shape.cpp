// Shape ops. Forward returns a view wherever the data allows; backward puts the gradient back
// into the input's layout (the inverse view, or a scatter into zeros for slices).
#include <stdexcept>
#include <string>

#include "attograd/autograd/ops.h"
#include "attograd/core/kernels.h"

namespace ag {

Variable reshape(const Variable& x, const Shape& shape) {
  const Shape in_shape = x.shape();
  return make_result("reshape", x.value().reshape(shape), {x},
                     [in_shape](const Tensor& g, GradSink& grads) { grads.add(0, g.reshape(in_shape)); });
}

Variable transpose(const Variable& x, int64_t a, int64_t b) {
  return make_result("transpose", x.value().transpose(a, b), {x},
                     [a, b](const Tensor& g, GradSink& grads) { grads.add(0, g.transpose(a, b)); });
}

Variable permute(const Variable& x, const std::vector<int64_t>& order) {
  Tensor y = x.value().permute(order);  // validates the order
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    inverse[static_cast<size_t>(normalize_axis(order[i], x.dim(), "permute"))] = static_cast<int64_t>(i);
  }
  return make_result("permute", std::move(y), {x},
                     [inverse](const Tensor& g, GradSink& grads) { grads.add(0, g.permute(inverse)); });
}

Variable slice(const Variable& x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  Tensor y = x.value().slice(axis, start, end, step);
  const Shape in_shape = x.shape();
  const DType dtype = x.dtype();
  // Recover the normalised start from the view's offset so backward writes the same elements.
  const int64_t ax = normalize_axis(axis, x.dim(), "slice");
  const int64_t n = in_shape[ax];
  int64_t s = start < 0 ? start + n : start;
  s = std::clamp<int64_t>(s, 0, n);
  return make_result("slice", std::move(y), {x}, [in_shape, dtype, ax, s, step](const Tensor& g, GradSink& grads) {
    Tensor full_grad = zeros(in_shape, dtype);
    full_grad.slice(ax, s, s + g.shape()[ax] * step, step).copy_(g);
    grads.add(0, full_grad);
  });
}

Variable narrow(const Variable& x, int64_t axis, int64_t start, int64_t length) {
  x.value().narrow(axis, start, length);  // validates the range with narrow's own message
  return slice(x, axis, start, start + length);
}

Variable unsqueeze(const Variable& x, int64_t axis) {
  const Shape in_shape = x.shape();
  return make_result("unsqueeze", x.value().unsqueeze(axis), {x},
                     [in_shape](const Tensor& g, GradSink& grads) { grads.add(0, g.reshape(in_shape)); });
}

Variable squeeze(const Variable& x, int64_t axis) {
  const Shape in_shape = x.shape();
  return make_result("squeeze", x.value().squeeze(axis), {x},
                     [in_shape](const Tensor& g, GradSink& grads) { grads.add(0, g.reshape(in_shape)); });
}

Variable concat(const std::vector<Variable>& parts, int64_t axis) {
  if (parts.empty()) throw std::invalid_argument("concat: needs at least one variable");
  std::vector<Tensor> values;
  values.reserve(parts.size());
  for (const Variable& p : parts) values.push_back(p.value());
  Tensor y = kernels::concat(values, axis);  // validates shapes and dtypes
  const int64_t ax = normalize_axis(axis, y.dim(), "concat");
  std::vector<int64_t> sizes;
  for (const Tensor& v : values) sizes.push_back(v.shape()[ax]);
  return make_result("concat", std::move(y), parts, [ax, sizes](const Tensor& g, GradSink& grads) {
    int64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (grads.wants(i)) grads.add(i, g.narrow(ax, at, sizes[i]));
      at += sizes[i];
    }
  });
}

Variable broadcast_to(const Variable& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const Shape in_shape = x.shape();
  return make_result("broadcast_to", x.value().expand(shape), {x},
                     [in_shape](const Tensor& g, GradSink& grads) { grads.add(0, kernels::sum_to(g, in_shape)); });
}

Variable contiguous(const Variable& x) {
  if (x.value().is_contiguous()) return x;
  return make_result("contiguous", x.value().contiguous(), {x},
                     [](const Tensor& g, GradSink& grads) { grads.add(0, g); });
}

}  // namespace ag
