// Tensor math without derivatives: elementwise maps, reductions, matrix products. Each takes
// inputs of any strides (transposed, sliced and broadcast views are read in place) and
// returns a new contiguous tensor; none builds a graph. Derivatives live in autograd/ops/,
// one file per op with its forward and backward kernels side by side; an op a user writes
// computes both with these functions. Binary kernels broadcast their operands; both operands
// must have the same dtype. Errors are std::invalid_argument naming the kernel and the shapes.
#pragma once

#include <cstdint>
#include <numbers>
#include <utility>
#include <vector>

#include "attograd/core/tensor.h"

namespace ag::kernels {

// ---- elementwise ----
// gelu is the exact form x Phi(x); gelu_tanh GPT-2's approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
enum class UnaryOp { neg, exp, log, sqrt, tanh, sigmoid, relu, gelu, gelu_tanh, silu, abs, square, reciprocal };
inline constexpr double kGeluTanhScale = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2 / pi)
inline constexpr double kGeluTanhCubic = 0.044715;
const char* unary_name(UnaryOp op);
Tensor unary(UnaryOp op, const Tensor& x);
// y = x * scale + shift
Tensor affine(const Tensor& x, double scale, double shift);
// y = x ** exponent
Tensor pow_scalar(const Tensor& x, double exponent);

// equal(a, b) = 1 where a == b, else 0
enum class BinaryOp { add, sub, mul, div, pow, maximum, minimum, equal };
const char* binary_name(BinaryOp op);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
inline Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::div, a, b); }

// dst += alpha * src, in place; src must broadcast to dst's shape, same dtype.
void add_(Tensor& dst, const Tensor& src, double alpha = 1.0);

// out = cond != 0 ? a : b, all three broadcast together (cond has the same dtype as a and b).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- reductions ----
// `axes` may be negative and must not repeat; an empty list reduces over every axis.
Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim = false);
Tensor amax(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim = false);
// Sums x over the dimensions that broadcasting stretched, giving a tensor of `shape`
// (how autograd/ops/shape.cpp undoes an expand). Throws unless `shape` broadcasts to x's
// shape.
Tensor sum_to(const Tensor& x, const Shape& shape);
// Normalised, sorted, de-duplicated axes (all axes for an empty list). The Shape overload
// names the tensor's shape when it throws.
std::vector<int64_t> reduction_axes(const std::vector<int64_t>& axes, int64_t rank, const char* op);
std::vector<int64_t> reduction_axes(const std::vector<int64_t>& axes, const Shape& shape, const char* op);
// The shape after reducing `axes` (kept as size 1 when keepdim).
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim);

// ---- matrix products (OpenBLAS) ----
// a: (..., M, K), b: (..., K, N) -> (..., M, N), batch dimensions broadcast. Operands whose last
// two dimensions are a transposed view go to BLAS with CblasTrans instead of being copied.
// bias: undefined, or (N,) added to every row of the result (fused: no second pass over it).
Tensor matmul(const Tensor& a, const Tensor& b, const Tensor& bias = Tensor());
// out += a b in place (BLAS beta = 1: no temporary, no zeroing pass). out must be contiguous
// with exactly matmul(a, b)'s shape and dtype. Rounding differs from out + matmul(a, b) when
// BLAS splits the inner dimension (it adds each partial sum to out); the bits are still the
// same for any thread count.
void matmul_add_(Tensor& out, const Tensor& a, const Tensor& b);
// out = a b, written over out's contents (the same bits as matmul(a, b)): for a caller that
// chooses when and where the product's memory is allocated. The same requirements on out.
void matmul_into_(Tensor& out, const Tensor& a, const Tensor& b);

// ---- concatenation ----
Tensor concat(const std::vector<Tensor>& parts, int64_t axis);

}  // namespace ag::kernels
