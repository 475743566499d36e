// rms_norm: scale each row by the inverse of its root mean square, then by a weight (Llama's,
// Qwen's and Mistral's norm: LayerNorm without the mean and the bias). Forward keeps x and
// rstd; backward rebuilds x_hat = x * rstd from them.
//
// Over the last axis, x seen as (rows, n):
//   forward                                   backward (gh = g * weight)
//   rstd = 1 / sqrt(mean(x^2) + eps)  (rows)   dweight = sum over rows of g * x_hat       (n)
//   x_hat = x * rstd                  (rows,n) dx = rstd * (gh - x_hat * mean(gh * x_hat)) (rows,n)
//   y = x_hat * weight                (rows,n)
// The mean of squares accumulates in double, as layer_norm's moments do.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/autograd/ops/row_sums.h"
#include "attograd/core/kernels.h"
#include "attograd/core/parallel.h"

namespace ag::kernels {

namespace {

// x's leading axes: the shape of rstd.
Shape leading_axes(const Tensor& x) {
  Shape lead;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) lead.push_back(x.shape()[d]);
  return lead;
}

void check_rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  if (!x.defined() || x.dim() < 1 || x.shape()[-1] == 0) {
    throw std::invalid_argument("rms_norm: needs an input with a non-empty last axis, got " +
                                (x.defined() ? x.shape().str() : std::string("undefined")));
  }
  if (weight.defined() && (weight.shape() != Shape{x.shape()[-1]} || weight.dtype() != x.dtype())) {
    throw std::invalid_argument("rms_norm: weight " + weight.shape().str() + " " + dtype_name(weight.dtype()) +
                                " does not match the last axis of input " + x.shape().str() + " " +
                                dtype_name(x.dtype()));
  }
  if (!(eps >= 0.0) || !std::isfinite(eps)) {
    throw std::invalid_argument("rms_norm: eps must be finite and >= 0, got " + std::to_string(eps));
  }
}

}  // namespace

RmsNormForward rms_norm_forward(const Tensor& x_in, const Tensor& weight_in, double eps) {
  check_rms_norm(x_in, weight_in, eps);
  const Tensor x = x_in.contiguous();
  const Tensor weight = weight_in.defined() ? weight_in.contiguous() : Tensor();
  RmsNormForward out{Tensor(x.shape(), x.dtype()), Tensor(leading_axes(x), x.dtype())};
  const int64_t n = x.shape()[-1], rows = x.numel() / n;
  dispatch(x.dtype(), [&]<typename T>(T) {
    const T* px = x.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    T* py = out.y.data<T>();
    T* prstd = out.rstd.data<T>();
    parallel_for(rows, parallel_chunks(rows, 6.0 * static_cast<double>(rows * n)), [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        const T* xr = px + r * n;
        T* yr = py + r * n;
        const double mean_sq = lane_sum<double>(n, [xr](int64_t j) {
                                 const double v = xr[j];
                                 return v * v;
                               }) /
                               static_cast<double>(n);
        const T s = static_cast<T>(1.0 / std::sqrt(mean_sq + eps));
        prstd[r] = s;
        if (pw) {
          for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] * s) * pw[j];
        } else {
          for (int64_t j = 0; j < n; ++j) yr[j] = xr[j] * s;
        }
      }
    });
  });
  return out;
}

RmsNormGrads rms_norm_backward(const Tensor& g_in, const Tensor& x_in, const Tensor& rstd_in, const Tensor& weight_in,
                               bool want_x, bool want_weight) {
  check_rms_norm(x_in, weight_in, 0.0);
  if (!g_in.defined() || g_in.shape() != x_in.shape() || g_in.dtype() != x_in.dtype() ||
      rstd_in.shape() != leading_axes(x_in)) {
    throw std::invalid_argument("rms_norm_backward: gradient " +
                                (g_in.defined() ? g_in.shape().str() : std::string("undefined")) + " or rstd " +
                                rstd_in.shape().str() + " does not match input " + x_in.shape().str());
  }
  const Tensor g = g_in.contiguous(), x = x_in.contiguous(), rstd = rstd_in.contiguous();
  const Tensor weight = weight_in.defined() ? weight_in.contiguous() : Tensor();
  const int64_t n = x.shape()[-1], rows = x.numel() / n;
  RmsNormGrads out;
  if (want_x) out.dx = Tensor(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>(T) {
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
    const T* pg = g.data<T>();
    const T* px = x.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* prstd = rstd.data<T>();
    T* pdx = want_x ? out.dx.data<T>() : nullptr;
    const T inv_n = static_cast<T>(1.0 / static_cast<double>(n));
    // dweight: each block of rows sums its own columns, added in block order below.
    const int64_t block_rows = std::max<int64_t>(1, kBackwardBlockElements / n);
    const int64_t blocks = (rows + block_rows - 1) / block_rows;
    const auto cols = static_cast<size_t>(n);
    std::vector<Acc> dw_part(want_weight ? static_cast<size_t>(blocks) * cols : 0);
    const auto run_block = [&](int64_t block) {
      Acc* dw = want_weight ? dw_part.data() + static_cast<size_t>(block) * cols : nullptr;
      if (dw) std::fill(dw, dw + n, Acc(0));
      const int64_t last = std::min(rows, (block + 1) * block_rows);
      for (int64_t r = block * block_rows; r < last; ++r) {
        const T* gr = pg + r * n;
        const T* xr = px + r * n;
        const T s = prstd[r];
        if (dw) {
          for (int64_t j = 0; j < n; ++j) dw[j] += static_cast<Acc>(gr[j] * (xr[j] * s));
        }
        if (!pdx) continue;
        T* dxr = pdx + r * n;
        if (pw) {
          const Acc dot = lane_sum<Acc>(n, [gr, pw, xr, s](int64_t j) { return (gr[j] * pw[j]) * (xr[j] * s); });
          const T mean_dot = static_cast<T>(dot) * inv_n;
          for (int64_t j = 0; j < n; ++j) dxr[j] = s * (gr[j] * pw[j] - (xr[j] * s) * mean_dot);
        } else {
          const Acc dot = lane_sum<Acc>(n, [gr, xr, s](int64_t j) { return gr[j] * (xr[j] * s); });
          const T mean_dot = static_cast<T>(dot) * inv_n;
          for (int64_t j = 0; j < n; ++j) dxr[j] = s * (gr[j] - (xr[j] * s) * mean_dot);
        }
      }
    };
    parallel_for(blocks, parallel_chunks(blocks, 8.0 * static_cast<double>(rows * n)),
                 [&](int64_t first, int64_t last) {
                   for (int64_t b = first; b < last; ++b) run_block(b);
                 });
    if (want_weight) {
      out.dweight = Tensor(Shape{n}, x.dtype());
      T* p = out.dweight.data<T>();
      for (int64_t j = 0; j < n; ++j) {
        Acc total = 0;
        for (int64_t b = 0; b < blocks; ++b) total += dw_part[static_cast<size_t>(b) * cols + static_cast<size_t>(j)];
        p[j] = static_cast<T>(total);
      }
    }
  });
  return out;
}

}  // namespace ag::kernels

namespace ag {

Variable rms_norm(const Variable& x, const Variable& weight, double eps) {
  const Tensor x_val = x.value().contiguous();  // the kernel reads it and backward reads the same copy
  const Tensor w_val = weight.defined() ? weight.value() : Tensor();
  kernels::RmsNormForward f = kernels::rms_norm_forward(x_val, w_val, eps);
  const bool grad_x = any_requires_grad({x});
  const bool any = grad_x || any_requires_grad({weight});
  const Tensor x_saved = any ? x_val : Tensor();
  const Tensor rstd = any ? f.rstd : Tensor();
  const Tensor w_saved = grad_x ? w_val : Tensor();
  return make_result("rms_norm", std::move(f.y), {x, weight}, [x_saved, rstd, w_saved](const Tensor& g, GradSink& grads) {
    kernels::RmsNormGrads d = kernels::rms_norm_backward(g, x_saved, rstd, w_saved, grads.wants(0), grads.wants(1));
    if (grads.wants(0)) grads.add(0, d.dx);
    if (grads.wants(1)) grads.add(1, d.dweight);
  });
}

}  // namespace ag
