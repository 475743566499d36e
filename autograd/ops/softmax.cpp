// softmax and log_softmax along an axis, fused: backward reads only the saved output.
//   softmax:      y = exp(x - max) / sum(exp(x - max))    gx = y * (g - sum(g * y))
//   log_softmax:  y = x - max - log(sum(exp(x - max)))    gx = g - exp(y) * sum(g)
// The input is viewed as (outer, n, inner) around the axis; rows of n are strided by `inner`.
// The composed twin (autograd/composed.h) builds the same from exp, sum and div.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attograd/autograd/ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"
#include "attograd/core/vec_math.h"

namespace ag::kernels {

namespace {

struct Layout {
  int64_t outer = 1, n = 1, inner = 1;
};

Layout layout_of(const Shape& shape, int64_t axis) {
  Layout l;
  for (int64_t i = 0; i < axis; ++i) l.outer *= shape[i];
  l.n = shape[axis];
  for (int64_t i = axis + 1; i < shape.rank(); ++i) l.inner *= shape[i];
  return l;
}

// Calls row(in_ptr, out_ptr, n, stride) for each of the outer*inner rows along the axis.
template <typename T, typename Row>
void for_each_axis_row(const Layout& l, const T* in, T* out, Row row) {
  for (int64_t o = 0; o < l.outer; ++o) {
    for (int64_t i = 0; i < l.inner; ++i) {
      const int64_t base = o * l.n * l.inner + i;
      row(in + base, out + base, l.n, l.inner);
    }
  }
}

Tensor softmax_impl(const Tensor& x_in, int64_t axis_in, bool log, const char* op) {
  if (!x_in.defined()) throw std::invalid_argument(std::string(op) + ": the input tensor is undefined");
  const int64_t axis = normalize_axis(axis_in, x_in.shape(), op);
  const Tensor x = x_in.contiguous();
  Tensor out(x.shape(), x.dtype());
  const Layout l = layout_of(x.shape(), axis);
  dispatch(x.dtype(), [&]<typename T>(T) {
    std::vector<T> strided_row;  // a row along a non-last axis, gathered for softmax_row
    for_each_axis_row(l, x.data<T>(), out.data<T>(), [log, &strided_row](const T* in, T* o, int64_t n, int64_t s) {
      if (!log) {  // the row softmax attention uses too (core/vec_math.h)
        if (s == 1) {
          softmax_row(in, o, n);
          return;
        }
        strided_row.resize(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) strided_row[static_cast<size_t>(j)] = in[j * s];
        softmax_row(strided_row.data(), strided_row.data(), n);
        for (int64_t j = 0; j < n; ++j) o[j * s] = strided_row[static_cast<size_t>(j)];
        return;
      }
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, in[j * s]);
      if (mx == -std::numeric_limits<T>::infinity()) mx = 0;  // an all -inf row stays finite in the shift
      // The exp pass has no running sum so that, on contiguous rows, it vectorises for f32.
      if (s == 1) {
        exp_row(in, o, n, mx);
      } else {
        for (int64_t j = 0; j < n; ++j) o[j * s] = vec_exp(in[j * s] - mx);
      }
      T total = 0;
      for (int64_t j = 0; j < n; ++j) total += o[j * s];
      const T lse = std::log(total);
      for (int64_t j = 0; j < n; ++j) o[j * s] = in[j * s] - mx - lse;
    });
  });
  return out;
}

Tensor softmax_backward_impl(const Tensor& y_in, const Tensor& g_in, int64_t axis_in, bool log, const char* op) {
  if (y_in.shape() != g_in.shape() || y_in.dtype() != g_in.dtype()) {
    throw std::invalid_argument(std::string(op) + ": output " + y_in.shape().str() + " " + dtype_name(y_in.dtype()) +
                                " and gradient " + g_in.shape().str() + " " + dtype_name(g_in.dtype()) + " differ");
  }
  const int64_t axis = normalize_axis(axis_in, y_in.shape(), op);
  const Tensor y = y_in.contiguous();
  const Tensor g = g_in.contiguous();
  Tensor gx(y.shape(), y.dtype());
  const Layout l = layout_of(y.shape(), axis);
  dispatch(y.dtype(), [&]<typename T>(T) {
    const T* py = y.data<T>();
    const T* pg = g.data<T>();
    T* po = gx.data<T>();
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const int64_t base = o * l.n * l.inner + i;
        const int64_t s = l.inner;
        T dot = 0;
        if (log) {
          for (int64_t j = 0; j < l.n; ++j) dot += pg[base + j * s];
          for (int64_t j = 0; j < l.n; ++j) po[base + j * s] = pg[base + j * s] - vec_exp(py[base + j * s]) * dot;
        } else {
          for (int64_t j = 0; j < l.n; ++j) dot += pg[base + j * s] * py[base + j * s];
          for (int64_t j = 0; j < l.n; ++j) po[base + j * s] = py[base + j * s] * (pg[base + j * s] - dot);
        }
      }
    }
  });
  return gx;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) { return softmax_impl(x, axis, false, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t axis) { return softmax_impl(x, axis, true, "log_softmax"); }

Tensor softmax_backward(const Tensor& y, const Tensor& g, int64_t axis) {
  return softmax_backward_impl(y, g, axis, false, "softmax_backward");
}
Tensor log_softmax_backward(const Tensor& y, const Tensor& g, int64_t axis) {
  return softmax_backward_impl(y, g, axis, true, "log_softmax_backward");
}

}  // namespace ag::kernels

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
