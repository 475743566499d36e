// Numeric kernels on Tensors. Each takes inputs of any strides (transposed, sliced and
// broadcast views are read in place) and returns a new contiguous tensor; none records
// gradients (that is autograd/'s job). Binary kernels broadcast their operands; both operands
// must have the same dtype. Errors are std::invalid_argument naming the kernel and the shapes.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "attograd/core/tensor.h"

namespace ag::kernels {

// ---- elementwise ----
enum class UnaryOp { neg, exp, log, sqrt, tanh, sigmoid, relu, gelu, abs, square, reciprocal };
const char* unary_name(UnaryOp op);
Tensor unary(UnaryOp op, const Tensor& x);
// y = x * scale + shift
Tensor affine(const Tensor& x, double scale, double shift);
// y = x ** exponent
Tensor pow_scalar(const Tensor& x, double exponent);

// The *_grad entries compute the backward of a unary function from the upstream gradient g
// (second operand) and the saved forward input x or output y (first operand):
//   relu_grad(x, g) = g * (x > 0)        gelu_grad(x, g) = g * gelu'(x)
//   tanh_grad(y, g) = g * (1 - y^2)      sigmoid_grad(y, g) = g * y * (1 - y)
//   equal(a, b) = 1 where a == b, else 0
enum class BinaryOp { add, sub, mul, div, pow, maximum, minimum, equal, relu_grad, gelu_grad, tanh_grad, sigmoid_grad };
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
// (the backward of expand). Throws unless `shape` broadcasts to x's shape.
Tensor sum_to(const Tensor& x, const Shape& shape);
// Normalised, sorted, de-duplicated axes (all axes for an empty list). The Shape overload
// names the tensor's shape when it throws.
std::vector<int64_t> reduction_axes(const std::vector<int64_t>& axes, int64_t rank, const char* op);
std::vector<int64_t> reduction_axes(const std::vector<int64_t>& axes, const Shape& shape, const char* op);
// The shape after reducing `axes` (kept as size 1 when keepdim).
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim);

// ---- softmax along one axis ----
// A row that is -inf everywhere (every key masked) gets softmax 0 everywhere, not NaN.
Tensor softmax(const Tensor& x, int64_t axis);
Tensor log_softmax(const Tensor& x, int64_t axis);
// gx = y * (g - sum(g * y))          (y = softmax output)
Tensor softmax_backward(const Tensor& y, const Tensor& g, int64_t axis);
// gx = g - exp(y) * sum(g)           (y = log_softmax output)
Tensor log_softmax_backward(const Tensor& y, const Tensor& g, int64_t axis);

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

// ---- concatenation ----
Tensor concat(const std::vector<Tensor>& parts, int64_t axis);

}  // namespace ag::kernels

// ====================================================================================
// ---- fused neural-network kernels (layer_norm.cpp, dropout.cpp, embedding.cpp,
//      cross_entropy.cpp, attention.cpp) ----
// Forward and backward pairs behind autograd/nn_ops.h. Each forward returns exactly what its
// backward reads, and every error names the op the user called (layer_norm, dropout, ...).
// ====================================================================================
#include "attograd/core/indices.h"
#include "attograd/core/rng.h"

namespace ag::kernels {

// ---- layer norm ----
// x: (..., *normalized) -> y of the same shape, normalised over the last `normalized_dims`
// axes with the biased variance and eps inside the square root (PyTorch's F.layer_norm).
// weight, bias: shape `normalized`, or undefined (no affine part).
// mean, rstd: (...) = x's leading axes, in x's dtype; rstd = 1 / sqrt(var + eps).
struct LayerNormForward {
  Tensor y, mean, rstd;
};
LayerNormForward layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    int64_t normalized_dims, double eps);
// g: x's shape. Only the wanted gradients are computed (the others stay undefined);
// dweight and dbias have the normalized shape.
struct LayerNormGrads {
  Tensor dx, dweight, dbias;
};
LayerNormGrads layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, int64_t normalized_dims, bool want_x, bool want_weight,
                                   bool want_bias);

// ---- dropout masks ----
// The mask of one random op: element i (row-major index in the op's logical shape) is kept
// when uniform_f64(key, i) >= p, so P(keep) = 1 - p whatever the dtype, and the same key gives
// the same mask in forward, backward, f32 and f64. Kept elements are scaled by 1 / (1 - p).
struct DropoutMask {
  double p = 0.0;
  uint64_t key = 0;
  bool active() const { return p > 0.0; }
  bool keeps(uint64_t index) const { return Generator::uniform_f64(key, index) >= p; }
  double scale() const { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }
};
// Throws std::invalid_argument naming `op` unless 0 <= p <= 1.
void check_dropout_probability(double p, const char* op);
// x * mask * scale, x of any strides (the mask follows x's logical indices) -> contiguous.
// Forward and backward of dropout are both this call.
Tensor apply_dropout(const Tensor& x, const DropoutMask& mask);

// ---- embedding ----
// weight: (num, dim), ids: any shape, values in [0, num) -> (*ids.shape, dim).
// padding_idx is -1 (none) or a row in [0, num).
Tensor embedding_forward(const Tensor& weight, const Indices& ids, int64_t padding_idx);
// g: (*ids.shape, dim) -> (num, dim): rows scatter-added by id, repeated ids accumulate, the
// padding row stays zero. ids must have passed embedding_forward's checks.
Tensor embedding_backward(const Tensor& g, const Indices& ids, int64_t num, int64_t padding_idx);

// ---- cross-entropy (log-softmax + NLL in one pass per row) ----
// logits: (N, C), targets: N values in [0, C) or ignore_index (shape only used in messages).
// loss_row = (1 - ls) * (lse - x_t) + ls * (lse - mean_j x_j), 0 for ignored rows.
// lse: (N,) log-sum-exp of each row, all backward needs besides the logits.
struct CrossEntropyForward {
  Tensor losses, lse;
};
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Indices& targets, int64_t ignore_index,
                                          double label_smoothing);
// row_grad: (N,) of any strides (an expanded scalar for mean/sum) -> d logits (N, C):
//   row_grad[r] * (softmax_j - (1 - ls) [j == t] - ls / C), zero rows for ignored targets.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Indices& targets,
                              int64_t ignore_index, double label_smoothing, const Tensor& row_grad);

// ---- scaled dot-product attention ----
// q: (B, H, Tq, Dk), k: (B, H, Tk, Dk), v: (B, H, Tk, Dv); keep and bias are undefined or
// broadcastable to (B, H, Tq, Tk). Operands may be strided views (a (B, T, H, D) tensor
// permuted to (B, H, T, D) goes to BLAS as it lies). Throws std::invalid_argument naming
// scaled_dot_product_attention and every shape.
void check_attention_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& keep,
                               const Tensor& bias);
// How the per-slice products run: BLAS calls, or direct loops that beat BLAS's fixed cost per
// call on small heads. `automatic` (what the library uses) picks by slice size; tests force
// each path to hold them equal.
enum class AttentionPath { automatic, blas, direct };
// weights = softmax over keys of (scale * q k^T + bias) where keep != 0 (a row with no kept
// key is all zero); output = (weights with `dropout` applied) v.
struct AttentionForward {
  Tensor output;   // (B, H, Tq, Dv)
  Tensor weights;  // (B, H, Tq, Tk), before dropout
};
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& keep,
                                   const Tensor& bias, double scale, const DropoutMask& dropout,
                                   AttentionPath path = AttentionPath::automatic);
// g: (B, H, Tq, Dv), any strides. Reads q only for dk, k only for dq, v only for dq/dk/dscores.
// dscores is the gradient of the pre-softmax scores (B, H, Tq, Tk), i.e. of an additive bias
// before it is summed back to the bias's shape. Unwanted gradients stay undefined.
struct AttentionGrads {
  Tensor dq, dk, dv, dscores;
};
AttentionGrads attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& weights, double scale, const DropoutMask& dropout, bool want_q,
                                  bool want_k, bool want_v, bool want_scores,
                                  AttentionPath path = AttentionPath::automatic);

}  // namespace ag::kernels
