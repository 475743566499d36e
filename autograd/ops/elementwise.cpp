// Elementwise ops. Binary ops first broadcast both operands to a common shape with
// broadcast_to (whose backward reduces), so each backward below deals with equal shapes only.
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "attograd/autograd/ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"
#include "attograd/core/parallel.h"
#include "attograd/core/vec_math.h"

namespace ag::kernels {

namespace {

// out[i] = f(saved[i], g[i]): the backward of a unary function from the tensor its forward
// saved (input or output) and the upstream gradient, both of the op's shape.
template <typename F>
Tensor unary_backward(const char* op, const Tensor& saved, const Tensor& g, F f) {
  if (!saved.defined() || !g.defined() || saved.shape() != g.shape() || saved.dtype() != g.dtype()) {
    throw std::invalid_argument(std::string(op) + ": the gradient " + (g.defined() ? g.shape().str() : "undefined") +
                                " does not match the saved tensor " +
                                (saved.defined() ? saved.shape().str() : "undefined"));
  }
  const Tensor s = saved.contiguous(), gc = g.contiguous();
  Tensor out(s.shape(), s.dtype());
  dispatch(s.dtype(), [&]<typename T>(T) {
    const T* ps = s.data<T>();
    const T* pg = gc.data<T>();
    T* po = out.data<T>();
    // Memory-bound like the forward maps: split over the pool from ~1M elements on.
    const int64_t n = out.numel();
    parallel_for(n, parallel_chunks(n, 4.0 * static_cast<double>(n)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = f(ps[i], pg[i]);
    });
  });
  return out;
}

}  // namespace

// relu runs once per feed-forward layer on its widest tensor: a plain select, which vectorises.
Tensor relu_backward(const Tensor& x, const Tensor& g) {
  return unary_backward("relu_backward", x, g, []<typename T>(T v, T d) { return v > 0 ? d : T(0); });
}

// gelu(x) = x Phi(x), so gelu'(x) = Phi(x) + x phi(x) with the normal cdf Phi and pdf phi.
// vec_erf and vec_exp (core/vec_math.h) keep the float loop free of libm calls, so it
// vectorises; double stays on std::erf and std::exp.
Tensor gelu_backward(const Tensor& x, const Tensor& g) {
  return unary_backward("gelu_backward", x, g, []<typename T>(T v, T d) {
    const T cdf = static_cast<T>(0.5) * (1 + vec_erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
    const T pdf = vec_exp(static_cast<T>(-0.5) * v * v) *
                  static_cast<T>(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2);
    return d * (cdf + v * pdf);
  });
}

// gelu_tanh(x) = x s with s = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), so
// gelu_tanh'(x) = s + x s (1 - s) 2 u'(x), u'(x) = sqrt(2/pi) (1 + 3 * 0.044715 x^2). s (1 - s)
// rather than exp(-2u) / (1 + exp(-2u))^2, which is inf / inf where the exp overflows.
Tensor gelu_tanh_backward(const Tensor& x, const Tensor& g) {
  return unary_backward("gelu_tanh_backward", x, g, []<typename T>(T v, T d) {
    constexpr T scale = static_cast<T>(kernels::kGeluTanhScale), cubic = static_cast<T>(kernels::kGeluTanhCubic);
    const T s = 1 / (1 + vec_exp(-2 * scale * (v + cubic * v * v * v)));
    const T du = scale * (1 + 3 * cubic * v * v);
    return d * (s + v * s * (1 - s) * 2 * du);
  });
}

// silu(x) = x s with s = sigmoid(x), so silu'(x) = s + x s (1 - s) = s (1 + x (1 - s)).
Tensor silu_backward(const Tensor& x, const Tensor& g) {
  return unary_backward("silu_backward", x, g, []<typename T>(T v, T d) {
    const T s = 1 / (1 + vec_exp(-v));
    return d * (s * (1 + v * (1 - s)));
  });
}

Tensor tanh_backward(const Tensor& y, const Tensor& g) {
  return unary_backward("tanh_backward", y, g, []<typename T>(T v, T d) { return d * (1 - v * v); });
}

Tensor sigmoid_backward(const Tensor& y, const Tensor& g) {
  return unary_backward("sigmoid_backward", y, g, []<typename T>(T v, T d) { return d * v * (1 - v); });
}

}  // namespace ag::kernels

namespace ag {

using kernels::BinaryOp;
using kernels::UnaryOp;

namespace {

void require_same_dtype(const Variable& a, const Variable& b, const char* op) {
  if (a.dtype() != b.dtype()) {
    throw std::invalid_argument(std::string(op) + ": dtypes differ: a=" + dtype_name(a.dtype()) + " " +
                                a.shape().str() + " b=" + dtype_name(b.dtype()) + " " + b.shape().str());
  }
}

// Both operands broadcast to their common shape (no copies: stride-0 views).
std::pair<Variable, Variable> broadcast_pair(const Variable& a, const Variable& b, const char* op) {
  require_same_dtype(a, b, op);
  if (a.shape() == b.shape()) return {a, b};
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  return {broadcast_to(a, s), broadcast_to(b, s)};
}

}  // namespace

Variable add(const Variable& a_in, const Variable& b_in) {
  auto [a, b] = broadcast_pair(a_in, b_in, "add");
  return make_result("add", kernels::add(a.value(), b.value()), {a, b}, [](const Tensor& g, GradSink& grads) {
    grads.add(0, g);
    grads.add(1, g);
  });
}

Variable sub(const Variable& a_in, const Variable& b_in) {
  auto [a, b] = broadcast_pair(a_in, b_in, "sub");
  return make_result("sub", kernels::sub(a.value(), b.value()), {a, b}, [](const Tensor& g, GradSink& grads) {
    grads.add(0, g);
    if (grads.wants(1)) grads.add(1, kernels::unary(UnaryOp::neg, g));
  });
}

Variable mul(const Variable& a_in, const Variable& b_in) {
  auto [a, b] = broadcast_pair(a_in, b_in, "mul");
  // Each side's gradient reads the other side's value: save only what will be read.
  const Tensor a_val = b.requires_grad() ? a.value() : Tensor();
  const Tensor b_val = a.requires_grad() ? b.value() : Tensor();
  return make_result("mul", kernels::mul(a.value(), b.value()), {a, b}, [a_val, b_val](const Tensor& g, GradSink& grads) {
    if (grads.wants(0)) grads.add(0, kernels::mul(g, b_val));
    if (grads.wants(1)) grads.add(1, kernels::mul(g, a_val));
  });
}

Variable div(const Variable& a_in, const Variable& b_in) {
  auto [a, b] = broadcast_pair(a_in, b_in, "div");
  Tensor out = kernels::div(a.value(), b.value());
  const Tensor b_val = b.value();
  const Tensor out_val = b.requires_grad() ? out : Tensor();
  return make_result("div", out, {a, b}, [b_val, out_val](const Tensor& g, GradSink& grads) {
    const Tensor g_over_b = kernels::div(g, b_val);
    if (grads.wants(0)) grads.add(0, g_over_b);
    // d(a/b)/db = -(a/b)/b
    if (grads.wants(1)) grads.add(1, kernels::unary(UnaryOp::neg, kernels::mul(g_over_b, out_val)));
  });
}

Variable add(const Variable& a, double b) {
  return make_result("add_scalar", kernels::affine(a.value(), 1.0, b), {a},
                     [](const Tensor& g, GradSink& grads) { grads.add(0, g); });
}

Variable mul(const Variable& a, double b) {
  return make_result("mul_scalar", kernels::affine(a.value(), b, 0.0), {a},
                     [b](const Tensor& g, GradSink& grads) { grads.add(0, kernels::affine(g, b, 0.0)); });
}

Variable neg(const Variable& x) {
  return make_result("neg", kernels::unary(UnaryOp::neg, x.value()), {x},
                     [](const Tensor& g, GradSink& grads) { grads.add(0, kernels::unary(UnaryOp::neg, g)); });
}

Variable exp(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::exp, x.value());
  return make_result("exp", y, {x}, [y](const Tensor& g, GradSink& grads) { grads.add(0, kernels::mul(g, y)); });
}

Variable log(const Variable& x) {
  const Tensor x_val = x.value();
  return make_result("log", kernels::unary(UnaryOp::log, x_val), {x},
                     [x_val](const Tensor& g, GradSink& grads) { grads.add(0, kernels::div(g, x_val)); });
}

Variable sqrt(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::sqrt, x.value());
  return make_result("sqrt", y, {x}, [y](const Tensor& g, GradSink& grads) {
    grads.add(0, kernels::affine(kernels::div(g, y), 0.5, 0.0));  // d sqrt(x) = 1 / (2 sqrt(x))
  });
}

Variable pow(const Variable& x, double exponent) {
  const Tensor x_val = x.value();
  return make_result("pow", kernels::pow_scalar(x_val, exponent), {x}, [x_val, exponent](const Tensor& g, GradSink& grads) {
    const Tensor d = kernels::affine(kernels::pow_scalar(x_val, exponent - 1.0), exponent, 0.0);
    grads.add(0, kernels::mul(g, d));
  });
}

Variable pow(const Variable& base_in, const Variable& exponent_in) {
  auto [base, exponent] = broadcast_pair(base_in, exponent_in, "pow");
  Tensor y = kernels::binary(BinaryOp::pow, base.value(), exponent.value());
  const Tensor b_val = base.value();
  const Tensor e_val = exponent.value();
  return make_result("pow", y, {base, exponent}, [y, b_val, e_val](const Tensor& g, GradSink& grads) {
    if (grads.wants(0)) {  // e * b^(e-1) = e * y / b
      grads.add(0, kernels::mul(g, kernels::div(kernels::mul(e_val, y), b_val)));
    }
    if (grads.wants(1)) {  // b^e * log(b)
      grads.add(1, kernels::mul(g, kernels::mul(y, kernels::unary(UnaryOp::log, b_val))));
    }
  });
}

Variable tanh(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::tanh, x.value());
  return make_result("tanh", y, {x}, [y](const Tensor& g, GradSink& grads) {
    grads.add(0, kernels::tanh_backward(y, g));
  });
}

Variable sigmoid(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::sigmoid, x.value());
  return make_result("sigmoid", y, {x}, [y](const Tensor& g, GradSink& grads) {
    grads.add(0, kernels::sigmoid_backward(y, g));
  });
}

// Backward reads the output, not the input: y > 0 exactly where x > 0 (NaN and -0 give 0 and
// fail both tests), so the mask is the same, and in a feed-forward block the output is saved
// anyway by the Linear that reads it, while the input would be one more (B, T, d_ff) tensor.
Variable relu(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::relu, x.value());
  const Tensor y_saved = y;
  return make_result("relu", std::move(y), {x}, [y_saved](const Tensor& g, GradSink& grads) {
    grads.add(0, kernels::relu_backward(y_saved, g));
  });
}

Variable gelu(const Variable& x) {
  const Tensor x_val = x.value();
  return make_result("gelu", kernels::unary(UnaryOp::gelu, x_val), {x}, [x_val](const Tensor& g, GradSink& grads) {
    grads.add(0, kernels::gelu_backward(x_val, g));
  });
}

Variable gelu_tanh(const Variable& x) {
  const Tensor x_val = x.value();
  return make_result("gelu_tanh", kernels::unary(UnaryOp::gelu_tanh, x_val), {x},
                     [x_val](const Tensor& g, GradSink& grads) { grads.add(0, kernels::gelu_tanh_backward(x_val, g)); });
}

Variable silu(const Variable& x) {
  const Tensor x_val = x.value();
  return make_result("silu", kernels::unary(UnaryOp::silu, x_val), {x},
                     [x_val](const Tensor& g, GradSink& grads) { grads.add(0, kernels::silu_backward(x_val, g)); });
}

}  // namespace ag
