#include "attograd/train/clip.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "attograd/core/kernels.h"

namespace ag {

namespace {

// Sum of squares of one gradient, accumulated in double whatever the dtype.
double squared_norm(const Tensor& g) {
  const Tensor c = g.contiguous();
  return dispatch(c.dtype(), [&]<typename T>(T) {
    const T* p = c.data<T>();
    double total = 0;
    for (int64_t i = 0; i < c.numel(); ++i) total += static_cast<double>(p[i]) * static_cast<double>(p[i]);
    return total;
  });
}

}  // namespace

double grad_norm(const NamedVariables& params) {
  double total = 0;
  for (const auto& [name, p] : params) {
    if (p.defined() && p.grad().defined()) total += squared_norm(p.grad());
  }
  return std::sqrt(total);
}

double clip_grad_norm(const NamedVariables& params, double max_norm, bool error_if_nonfinite) {
  if (!(max_norm > 0) || !std::isfinite(max_norm)) {
    throw std::invalid_argument("clip_grad_norm: max_norm must be positive and finite, got " + std::to_string(max_norm));
  }
  const double norm = grad_norm(params);
  if (!std::isfinite(norm) && error_if_nonfinite) {
    throw std::runtime_error("clip_grad_norm: the total gradient norm is " + std::to_string(norm) + " over " +
                             std::to_string(params.size()) + " parameters (a NaN or Inf gradient)");
  }
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return norm;  // within bounds; a NaN coefficient falls through and spreads, as in PyTorch
  for (const auto& [name, p] : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    Variable handle = p;  // a handle shares the variable: its gradient is the one to scale
    Tensor& g = handle.mutable_grad();
    if (g.is_contiguous()) {
      dispatch(g.dtype(), [&]<typename T>(T) {
        T* d = g.data<T>();
        const T c = static_cast<T>(coef);
        for (int64_t i = 0; i < g.numel(); ++i) d[i] = d[i] * c;
      });
    } else {
      g.copy_(kernels::affine(g, coef, 0.0));
    }
  }
  return norm;
}

}  // namespace ag
