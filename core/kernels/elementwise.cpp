// Elementwise kernels: unary maps, binary ops with broadcasting, in-place accumulation, where.
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "attograd/core/kernels.h"
#include "attograd/core/parallel.h"
#include "attograd/core/strided.h"
#include "attograd/core/vec_math.h"

namespace ag::kernels {

namespace {

void require_defined(const Tensor& t, const char* op) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": the input tensor is undefined");
}

void require_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype()) {
    throw std::invalid_argument(std::string(op) + ": dtypes differ: a=" + dtype_name(a.dtype()) + " " +
                                a.shape().str() + " b=" + dtype_name(b.dtype()) + " " + b.shape().str() +
                                " (convert one with .to())");
  }
}

// vec_erf: erf_f32 for float, so the float loop vectorises instead of calling libm per
// element; std::erf for double.
template <typename T>
T gelu_value(T x) {
  return static_cast<T>(0.5) * x * (1 + vec_erf(x * static_cast<T>(std::numbers::sqrt2 / 2)));
}

// GPT-2's GELU, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), written as
// x sigmoid(2u) (the same function: 1 + tanh(u) = 2 sigmoid(2u)), so that the float loop is one
// vec_exp and vectorises. Where exp(-2u) overflows to +inf the result is x / inf = -0 (x < 0).
template <typename T>
T gelu_tanh_value(T x) {
  const T u2 = static_cast<T>(2 * kGeluTanhScale) * (x + static_cast<T>(kGeluTanhCubic) * x * x * x);
  return x / (1 + vec_exp(-u2));
}

// silu(x) = x sigmoid(x), written x / (1 + exp(-x)) so that the float loop is one vec_exp;
// where exp(-x) overflows the result is -0.
template <typename T>
T silu_value(T x) {
  return x / (1 + vec_exp(-x));
}

template <typename T>
T apply_unary(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::sigmoid: return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
    case UnaryOp::relu: return x > 0 ? x : T(0);
    case UnaryOp::gelu: return gelu_value(x);
    case UnaryOp::gelu_tanh: return gelu_tanh_value(x);
    case UnaryOp::silu: return silu_value(x);
    case UnaryOp::abs: return std::abs(x);
    case UnaryOp::square: return x * x;
    case UnaryOp::reciprocal: return 1 / x;
  }
  return x;
}

template <typename T>
T apply_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::pow: return std::pow(a, b);
    case BinaryOp::maximum: return (a > b || std::isnan(a)) ? a : b;
    case BinaryOp::minimum: return (a < b || std::isnan(a)) ? a : b;
    case BinaryOp::equal: return a == b ? T(1) : T(0);
  }
  return a;
}

// What one element of a contiguous elementwise loop weighs in parallel_chunks' flops. These
// loops are bound by memory traffic, and on this 2-core VM a split of the small model's 0.5M
// element relu measured slower (0.5-0.7 -> 0.7-0.9 ms, loaded machine), so the split starts
// at ~1M elements: the medium model's relu and up.
constexpr double kElementWork = 4.0;

// Calls body(begin, end) over [0, n) in pieces on the pool when n is large. Every element is
// computed alone, so the bits do not depend on the split.
template <typename Body>
void for_range(int64_t n, Body body) {
  parallel_for(n, parallel_chunks(n, kElementWork * static_cast<double>(n)), body);
}

// out[i] = f(x[i]) for any strides of x; out is contiguous.
template <typename T, typename F>
void map_unary(const Tensor& x, Tensor& out, F f) {
  const T* px = x.data<T>();
  T* po = out.data<T>();
  if (x.is_contiguous()) {
    for_range(x.numel(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = f(px[i]);
    });
    return;
  }
  const std::vector<int64_t>& so = out.strides();
  for_each_row<2>(x.shape(), {&so, &x.strides()}, [&](auto off, int64_t n, auto inner) {
    for (int64_t i = 0; i < n; ++i) po[off[0] + i * inner[0]] = f(px[off[1] + i * inner[1]]);
  });
}

}  // namespace

const char* unary_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::sigmoid: return "sigmoid";
    case UnaryOp::relu: return "relu";
    case UnaryOp::gelu: return "gelu";
    case UnaryOp::gelu_tanh: return "gelu_tanh";
    case UnaryOp::silu: return "silu";
    case UnaryOp::abs: return "abs";
    case UnaryOp::square: return "square";
    case UnaryOp::reciprocal: return "reciprocal";
  }
  return "unary";
}

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::pow: return "pow";
    case BinaryOp::maximum: return "maximum";
    case BinaryOp::minimum: return "minimum";
    case BinaryOp::equal: return "equal";
  }
  return "binary";
}

Tensor unary(UnaryOp op, const Tensor& x) {
  require_defined(x, unary_name(op));
  Tensor out(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>(T) {
    switch (op) {  // one instantiation per op keeps the inner loop free of the switch
      case UnaryOp::neg: map_unary<T>(x, out, [](T v) { return -v; }); break;
      case UnaryOp::exp: map_unary<T>(x, out, [](T v) { return std::exp(v); }); break;
      case UnaryOp::relu: map_unary<T>(x, out, [](T v) { return v > 0 ? v : T(0); }); break;
      case UnaryOp::square: map_unary<T>(x, out, [](T v) { return v * v; }); break;
      case UnaryOp::gelu: map_unary<T>(x, out, [](T v) { return gelu_value(v); }); break;
      default: map_unary<T>(x, out, [op](T v) { return apply_unary(op, v); }); break;
    }
  });
  return out;
}

Tensor affine(const Tensor& x, double scale, double shift) {
  require_defined(x, "affine");
  Tensor out(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>(T) {
    const T s = static_cast<T>(scale);
    const T b = static_cast<T>(shift);
    map_unary<T>(x, out, [s, b](T v) { return v * s + b; });
  });
  return out;
}

Tensor pow_scalar(const Tensor& x, double exponent) {
  require_defined(x, "pow");
  Tensor out(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>(T) {
    const T e = static_cast<T>(exponent);
    if (exponent == 2.0) {
      map_unary<T>(x, out, [](T v) { return v * v; });
    } else {
      map_unary<T>(x, out, [e](T v) { return std::pow(v, e); });
    }
  });
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  require_defined(a, name);
  require_defined(b, name);
  require_same_dtype(a, b, name);
  const Shape shape = a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out(shape, a.dtype());
  dispatch(a.dtype(), [&]<typename T>(T) {
    T* po = out.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const auto run = [&](auto f) {
      if (a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous()) {
        for_range(out.numel(), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) po[i] = f(pa[i], pb[i]);
        });
        return;
      }
      const Tensor ea = a.expand(shape);
      const Tensor eb = b.expand(shape);
      for_each_row<3>(shape, {&out.strides(), &ea.strides(), &eb.strides()}, [&](auto off, int64_t n, auto in) {
        T* o = po + off[0];
        const T* x = pa + off[1];
        const T* y = pb + off[2];
        for (int64_t i = 0; i < n; ++i) o[i * in[0]] = f(x[i * in[1]], y[i * in[2]]);
      });
    };
    switch (op) {
      case BinaryOp::add: run([](T x, T y) { return x + y; }); break;
      case BinaryOp::sub: run([](T x, T y) { return x - y; }); break;
      case BinaryOp::mul: run([](T x, T y) { return x * y; }); break;
      case BinaryOp::div: run([](T x, T y) { return x / y; }); break;
      default: run([op](T x, T y) { return apply_binary(op, x, y); }); break;
    }
  });
  return out;
}

void add_(Tensor& dst, const Tensor& src, double alpha) {
  require_defined(dst, "add_");
  require_defined(src, "add_");
  require_same_dtype(dst, src, "add_");
  if (!broadcastable_to(src.shape(), dst.shape())) {
    throw std::invalid_argument("add_: cannot add a tensor of shape " + src.shape().str() + " into shape " +
                                dst.shape().str());
  }
  // A source that overlaps dst otherwise than element for element is read from a copy.
  const Tensor& source = memory_overlap(dst, src.expand(dst.shape())) == MemoryOverlap::partial ? src.clone() : src;
  dispatch(dst.dtype(), [&]<typename T>(T) {
    T* pd = dst.data<T>();
    const T* ps = source.data<T>();
    const T k = static_cast<T>(alpha);
    if (source.shape() == dst.shape() && source.is_contiguous() && dst.is_contiguous()) {
      for_range(dst.numel(), [&](int64_t begin, int64_t end) {
        if (alpha == 1.0) {
          for (int64_t i = begin; i < end; ++i) pd[i] += ps[i];
        } else {
          for (int64_t i = begin; i < end; ++i) pd[i] += k * ps[i];
        }
      });
      return;
    }
    const Tensor es = source.expand(dst.shape());
    for_each_row<2>(dst.shape(), {&dst.strides(), &es.strides()}, [&](auto off, int64_t n, auto in) {
      for (int64_t i = 0; i < n; ++i) pd[off[0] + i * in[0]] += k * ps[off[1] + i * in[1]];
    });
  });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  require_defined(cond, "where");
  require_defined(a, "where");
  require_defined(b, "where");
  require_same_dtype(a, b, "where");
  require_same_dtype(cond, a, "where");
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out(shape, a.dtype());
  dispatch(a.dtype(), [&]<typename T>(T) {
    const Tensor ec = cond.expand(shape);
    const Tensor ea = a.expand(shape);
    const Tensor eb = b.expand(shape);
    T* po = out.data<T>();
    const T* pc = ec.data<T>();
    const T* pa = ea.data<T>();
    const T* pb = eb.data<T>();
    for_each_row<4>(shape, {&out.strides(), &ec.strides(), &ea.strides(), &eb.strides()},
                    [&](auto off, int64_t n, auto in) {
                      for (int64_t i = 0; i < n; ++i) {
                        po[off[0] + i * in[0]] =
                            pc[off[1] + i * in[1]] != 0 ? pa[off[2] + i * in[2]] : pb[off[3] + i * in[3]];
                      }
                    });
  });
  return out;
}

}  // namespace ag::kernels
