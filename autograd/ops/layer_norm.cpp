// layer_norm: normalise over the trailing axes, then scale and shift. Forward keeps x, mean and
// rstd (x_hat is rebuilt from them in backward); backward is hand-written in
// kernels::layer_norm_backward.
//
// The kernels:
// Layer normalisation over the trailing axes, forward and backward.
//
// x is seen as (rows, n): n = product of the normalised axes. Forward reads each row twice
// (mean, then the variance of x - mean: the two-pass form stays accurate when |mean| >> std)
// and writes y in a third sweep; backward needs x, mean and rstd only, rebuilding
// x_hat = (x - mean) * rstd on the fly instead of keeping it.
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

struct RowLayout {
  int64_t rows = 1;
  int64_t n = 1;
  Shape leading;     // x's axes in front of the normalised ones
  Shape normalized;  // the normalised axes
};

RowLayout row_layout(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t normalized_dims) {
  if (!x.defined()) throw std::invalid_argument("layer_norm: the input tensor is undefined");
  if (normalized_dims < 1 || normalized_dims > x.dim()) {
    throw std::invalid_argument("layer_norm: cannot normalise over the last " + std::to_string(normalized_dims) +
                                " axes of an input of shape " + x.shape().str());
  }
  RowLayout l;
  const int64_t lead = x.dim() - normalized_dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) l.leading.push_back(x.shape()[d]);
    else l.normalized.push_back(x.shape()[d]);
  }
  l.rows = l.leading.numel();
  l.n = l.normalized.numel();
  if (l.n == 0) {
    throw std::invalid_argument("layer_norm: the normalised axes " + l.normalized.str() + " of input " +
                                x.shape().str() + " hold no elements");
  }
  const auto check_affine = [&](const Tensor& t, const char* name) {
    if (!t.defined()) return;
    if (t.shape() != l.normalized || t.dtype() != x.dtype()) {
      throw std::invalid_argument(std::string("layer_norm: ") + name + " " + t.shape().str() + " " +
                                  dtype_name(t.dtype()) + " does not match the normalised shape " +
                                  l.normalized.str() + " " + dtype_name(x.dtype()) + " of input " + x.shape().str());
    }
  };
  check_affine(weight, "weight");
  check_affine(bias, "bias");
  return l;
}

// Mean and 1 / sqrt(var + eps) of one row, in double. Two passes (mean first, then the
// squares of x - mean) stay accurate when |mean| >> std.
template <typename T>
std::pair<double, double> row_moments(const T* xr, int64_t n, double eps) {
  const double inv_n = 1.0 / static_cast<double>(n);
  const double mu = lane_sum<double>(n, [xr](int64_t j) { return xr[j]; }) * inv_n;
  const double var = lane_sum<double>(n, [xr, mu](int64_t j) {
                       const double d = static_cast<double>(xr[j]) - mu;
                       return d * d;
                     }) *
                     inv_n;
  return {mu, 1.0 / std::sqrt(var + eps)};
}

}  // namespace

LayerNormForward layer_norm_forward(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                                    int64_t normalized_dims, double eps) {
  const RowLayout l = row_layout(x_in, weight_in, bias_in, normalized_dims);
  if (!(eps >= 0.0) || !std::isfinite(eps)) {
    throw std::invalid_argument("layer_norm: eps must be finite and >= 0, got " + std::to_string(eps));
  }
  const Tensor x = x_in.contiguous();
  const Tensor weight = weight_in.defined() ? weight_in.contiguous() : Tensor();
  const Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  LayerNormForward out{Tensor(x.shape(), x.dtype()), Tensor(l.leading, x.dtype()), Tensor(l.leading, x.dtype())};
  dispatch(x.dtype(), [&]<typename T>(T) {
    // Row statistics accumulate in double: f32 sums over wide rows otherwise lose digits.
    const T* px = x.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    T* py = out.y.data<T>();
    T* pmean = out.mean.data<T>();
    T* prstd = out.rstd.data<T>();
    const int64_t n = l.n;
    // Rows are independent: split them over the pool (the bits do not depend on the split).
    const double work = 8.0 * static_cast<double>(l.rows * n);
    parallel_for(l.rows, parallel_chunks(l.rows, work), [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        const T* xr = px + r * n;
        T* yr = py + r * n;
        const auto [mu, rs] = row_moments(xr, n, eps);
        pmean[r] = static_cast<T>(mu);
        prstd[r] = static_cast<T>(rs);
        const T m = static_cast<T>(mu);
        const T s = static_cast<T>(rs);
        if (pw && pb) {
          for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) * s * pw[j] + pb[j];
        } else if (pw) {
          for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) * s * pw[j];
        } else if (pb) {
          for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) * s + pb[j];
        } else {
          for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) * s;
        }
      }
    });
  });
  return out;
}

LayerNormGrads layer_norm_backward(const Tensor& g_in, const Tensor& x_in, const Tensor& mean_in,
                                   const Tensor& rstd_in, const Tensor& weight_in, int64_t normalized_dims,
                                   bool want_x, bool want_weight, bool want_bias) {
  const RowLayout l = row_layout(x_in, weight_in, Tensor(), normalized_dims);
  if (!g_in.defined() || g_in.shape() != x_in.shape() || g_in.dtype() != x_in.dtype()) {
    throw std::invalid_argument("layer_norm_backward: gradient " +
                                (g_in.defined() ? g_in.shape().str() : std::string("undefined")) +
                                " does not match input " + x_in.shape().str());
  }
  if (mean_in.shape() != l.leading || rstd_in.shape() != l.leading) {
    throw std::invalid_argument("layer_norm_backward: saved statistics " + mean_in.shape().str() + " / " +
                                rstd_in.shape().str() + " do not match the leading axes " + l.leading.str() +
                                " of input " + x_in.shape().str());
  }
  const Tensor g = g_in.contiguous();
  const Tensor x = x_in.contiguous();
  const Tensor mean = mean_in.contiguous();
  const Tensor rstd = rstd_in.contiguous();
  const Tensor weight = weight_in.defined() ? weight_in.contiguous() : Tensor();
  LayerNormGrads out;
  if (want_x) out.dx = Tensor(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>(T) {
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
    const int64_t n = l.n;
    const T* pg = g.data<T>();
    const T* px = x.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pmean = mean.data<T>();
    const T* prstd = rstd.data<T>();
    T* pdx = want_x ? out.dx.data<T>() : nullptr;
    const T inv_n = static_cast<T>(1.0 / static_cast<double>(n));
    // dweight = sum over rows of g * x_hat, dbias = sum over rows of g: each block of rows
    // sums its own columns in Acc (partials, one row of n per block), added in block order below.
    const int64_t block_rows = std::max<int64_t>(1, kBackwardBlockElements / n);
    const int64_t blocks = (l.rows + block_rows - 1) / block_rows;
    const auto cols = static_cast<size_t>(n);
    std::vector<Acc> dw_part(want_weight ? static_cast<size_t>(blocks) * cols : 0);
    std::vector<Acc> db_part(want_bias ? static_cast<size_t>(blocks) * cols : 0);
    const auto run_block = [&](int64_t block) {
      Acc* dw = want_weight ? dw_part.data() + static_cast<size_t>(block) * cols : nullptr;
      Acc* db = want_bias ? db_part.data() + static_cast<size_t>(block) * cols : nullptr;
      if (dw) std::fill(dw, dw + n, Acc(0));
      if (db) std::fill(db, db + n, Acc(0));
      const int64_t last = std::min(l.rows, (block + 1) * block_rows);
      for (int64_t r = block * block_rows; r < last; ++r) {
        const T* gr = pg + r * n;
        const T* xr = px + r * n;
        const T m = pmean[r];
        const T s = prstd[r];
        if (dw && db) {  // one sweep for both column sums (the training case)
          for (int64_t j = 0; j < n; ++j) {
            dw[j] += static_cast<Acc>(gr[j] * ((xr[j] - m) * s));
            db[j] += static_cast<Acc>(gr[j]);
          }
        } else if (dw) {
          for (int64_t j = 0; j < n; ++j) dw[j] += static_cast<Acc>(gr[j] * ((xr[j] - m) * s));
        } else if (db) {
          for (int64_t j = 0; j < n; ++j) db[j] += static_cast<Acc>(gr[j]);
        }
        if (!pdx) continue;
        // With gh = g * weight and x_hat the normalised row:
        //   dx = rstd * (gh - mean(gh) - x_hat * mean(gh * x_hat))
        T* dxr = pdx + r * n;
        if (pw) {
          const Acc sum_gh = lane_sum<Acc>(n, [gr, pw](int64_t j) { return gr[j] * pw[j]; });
          const Acc sum_gh_xhat =
              lane_sum<Acc>(n, [gr, pw, xr, m, s](int64_t j) { return (gr[j] * pw[j]) * ((xr[j] - m) * s); });
          const T mean_gh = static_cast<T>(sum_gh) * inv_n;
          const T mean_gh_xhat = static_cast<T>(sum_gh_xhat) * inv_n;
          for (int64_t j = 0; j < n; ++j) dxr[j] = s * (gr[j] * pw[j] - mean_gh - (xr[j] - m) * s * mean_gh_xhat);
        } else {
          const Acc sum_gh = lane_sum<Acc>(n, [gr](int64_t j) { return gr[j]; });
          const Acc sum_gh_xhat = lane_sum<Acc>(n, [gr, xr, m, s](int64_t j) { return gr[j] * ((xr[j] - m) * s); });
          const T mean_gh = static_cast<T>(sum_gh) * inv_n;
          const T mean_gh_xhat = static_cast<T>(sum_gh_xhat) * inv_n;
          for (int64_t j = 0; j < n; ++j) dxr[j] = s * (gr[j] - mean_gh - (xr[j] - m) * s * mean_gh_xhat);
        }
      }
    };
    // About a dozen flops per element: split only when that pays (parallel_chunks decides).
    const double work = 12.0 * static_cast<double>(l.rows * n);
    parallel_for(blocks, parallel_chunks(blocks, work), [&](int64_t first, int64_t last) {
      for (int64_t b = first; b < last; ++b) run_block(b);
    });
    const auto finish = [&](const std::vector<Acc>& part, Tensor& dst) {
      dst = Tensor(l.normalized, x.dtype());
      T* p = dst.data<T>();
      for (int64_t j = 0; j < n; ++j) {
        Acc total = 0;
        for (int64_t b = 0; b < blocks; ++b) total += part[static_cast<size_t>(b) * cols + static_cast<size_t>(j)];
        p[j] = static_cast<T>(total);
      }
    };
    if (want_weight) finish(dw_part, out.dweight);
    if (want_bias) finish(db_part, out.dbias);
  });
  return out;
}

}  // namespace ag::kernels

namespace ag {

Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, int64_t normalized_dims,
                    double eps) {
  // Made contiguous once here: the kernel reads it and backward reads the same copy.
  const Tensor x_val = x.value().contiguous();
  const Tensor w_val = weight.defined() ? weight.value() : Tensor();
  kernels::LayerNormForward f =
      kernels::layer_norm_forward(x_val, w_val, bias.defined() ? bias.value() : Tensor(), normalized_dims, eps);
  // dx and dweight read x, mean and rstd; dx also reads the weight; dbias reads only g.
  const bool grad_x = any_requires_grad({x});
  const bool need_stats = grad_x || any_requires_grad({weight});
  const Tensor x_saved = need_stats ? x_val : Tensor();
  const Tensor mean = need_stats ? f.mean : Tensor();
  const Tensor rstd = need_stats ? f.rstd : Tensor();
  const Tensor w_saved = grad_x ? w_val : Tensor();
  return make_result("layer_norm", std::move(f.y), {x, weight, bias},
                     [x_saved, mean, rstd, w_saved, normalized_dims](const Tensor& g, GradSink& grads) {
                       if (!grads.wants(0) && !grads.wants(1)) {  // only the bias: a column sum of g
                         const int64_t lead = g.dim() - normalized_dims;
                         std::vector<int64_t> axes;
                         for (int64_t d = 0; d < lead; ++d) axes.push_back(d);
                         grads.add(2, axes.empty() ? g : kernels::sum(g, axes));
                         return;
                       }
                       kernels::LayerNormGrads d =
                           kernels::layer_norm_backward(g, x_saved, mean, rstd, w_saved, normalized_dims,
                                                        grads.wants(0), grads.wants(1), grads.wants(2));
                       if (grads.wants(0)) grads.add(0, d.dx);
                       if (grads.wants(1)) grads.add(1, d.dweight);
                       if (grads.wants(2)) grads.add(2, d.dbias);
                     });
}

}  // namespace ag
