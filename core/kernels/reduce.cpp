// Reductions over any set of axes (sum, mean, max) and sum_to, which undoes a broadcast
// (autograd/ops/shape.cpp uses it).
//
// Every reduction works the same way: the output (with size-1 reduced axes) is expanded back to
// the input's shape with stride 0 on the reduced axes, and one strided walk over the input
// folds each element into the output element it lands on.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "attograd/core/kernels.h"
#include "attograd/core/strided.h"

namespace ag::kernels {

std::vector<int64_t> reduction_axes(const std::vector<int64_t>& axes, int64_t rank, const char* op) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw std::invalid_argument(std::string(op) + ": an axis is repeated in " + Shape(axes).str());
  }
  return out;
}

std::vector<int64_t> reduction_axes(const std::vector<int64_t>& axes, const Shape& shape, const char* op) {
  if (axes.empty()) return reduction_axes(axes, shape.rank(), op);
  std::vector<int64_t> out;
  for (int64_t a : axes) out.push_back(normalize_axis(a, shape, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw std::invalid_argument(std::string(op) + ": an axis is repeated in " + Shape(axes).str() + " for shape " +
                                shape.str());
  }
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < shape.rank(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

namespace {

enum class Fold { sum, max };

Tensor reduce(const Tensor& x, const std::vector<int64_t>& axes_in, bool keepdim, Fold fold, const char* op) {
  if (!x.defined()) throw std::invalid_argument(std::string(op) + ": the input tensor is undefined");
  const std::vector<int64_t> axes = reduction_axes(axes_in, x.shape(), op);
  const Shape kept = reduced_shape(x.shape(), axes, true);
  if (fold == Fold::max) {
    for (int64_t a : axes) {
      if (x.shape()[a] == 0) {
        throw std::invalid_argument(std::string(op) + ": cannot take the max over axis " + std::to_string(a) +
                                    " of size 0 in shape " + x.shape().str());
      }
    }
  }
  Tensor out(kept, x.dtype());
  dispatch(x.dtype(), [&]<typename T>(T) {
    // Sums accumulate in double: long f32 rows otherwise lose digits.
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
    const int64_t m = out.numel();
    std::vector<Acc> acc(static_cast<size_t>(m),
                         fold == Fold::sum ? Acc(0) : -std::numeric_limits<Acc>::infinity());
    std::vector<int64_t> acc_strides = contiguous_strides(kept);
    for (int64_t i = 0; i < x.dim(); ++i) {
      if (kept[i] != x.shape()[i]) acc_strides[static_cast<size_t>(i)] = 0;
    }
    const T* px = x.data<T>();
    Acc* pa = acc.data();
    for_each_row<2>(x.shape(), {&acc_strides, &x.strides()}, [&](auto off, int64_t n, auto in) {
      Acc* a = pa + off[0];
      const T* v = px + off[1];
      if (fold == Fold::sum) {
        if (in[0] == 0) {
          Acc s = 0;
          for (int64_t i = 0; i < n; ++i) s += v[i * in[1]];
          *a += s;
        } else {
          for (int64_t i = 0; i < n; ++i) a[i * in[0]] += v[i * in[1]];
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          Acc& o = a[i * in[0]];
          const Acc e = v[i * in[1]];
          if (e > o || std::isnan(e)) o = e;
        }
      }
    });
    T* po = out.data<T>();
    for (int64_t i = 0; i < m; ++i) po[i] = static_cast<T>(pa[i]);
  });
  return keepdim ? out : out.view(reduced_shape(x.shape(), axes, false));
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce(x, axes, keepdim, Fold::sum, "sum");
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  if (!x.defined()) throw std::invalid_argument("mean: the input tensor is undefined");
  const std::vector<int64_t> ax = reduction_axes(axes, x.shape(), "mean");
  int64_t count = 1;
  for (int64_t a : ax) count *= x.shape()[a];
  if (count == 0) {
    throw std::invalid_argument("mean: no elements to average over axes " + Shape(ax).str() + " of shape " +
                                x.shape().str());
  }
  Tensor s = reduce(x, axes, keepdim, Fold::sum, "mean");
  return affine(s, 1.0 / static_cast<double>(count), 0.0);
}

Tensor amax(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce(x, axes, keepdim, Fold::max, "max");
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (!x.defined()) throw std::invalid_argument("sum_to: the input tensor is undefined");
  if (x.shape() == shape) return x;
  if (!broadcastable_to(shape, x.shape())) {
    throw std::invalid_argument("sum_to: shape " + shape.str() + " does not broadcast to " + x.shape().str());
  }
  const int64_t lead = x.dim() - shape.rank();
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < lead || shape[i - lead] == 1) axes.push_back(i);
  }
  // Reduce with keepdim, then drop the leading axes that `shape` does not have.
  return reduce(x, axes, true, Fold::sum, "sum_to").view(shape);
}

}  // namespace ag::kernels
