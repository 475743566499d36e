// The forward and backward kernels of the differentiable ops, on Tensors. Each is defined in
// its op's own file (autograd/ops/<op>.cpp) beside the Variable wiring that calls it, e.g.
// attention_forward and attention_backward in autograd/ops/attention.cpp. Internal: not
// installed; the op files and the tests that hold the kernels' paths, dtypes and thread counts
// equal include it. Errors name the op the user called (layer_norm, dropout, ...).
#pragma once

#include <cstdint>

#include "attograd/autograd/attention_mask.h"
#include "attograd/autograd/nn_ops.h"
#include "attograd/core/indices.h"
#include "attograd/core/kernels.h"
#include "attograd/core/prefix_gemm.h"
#include "attograd/core/rng.h"
#include "attograd/core/tensor.h"

namespace ag::kernels {

// ---- elementwise backward (ops/elementwise.cpp), from the upstream gradient g and the
//      saved forward input x or output y ----
Tensor relu_backward(const Tensor& x, const Tensor& g);     // g * (x > 0)
Tensor gelu_backward(const Tensor& x, const Tensor& g);     // g * gelu'(x)
Tensor gelu_tanh_backward(const Tensor& x, const Tensor& g);  // g * gelu_tanh'(x)
Tensor silu_backward(const Tensor& x, const Tensor& g);     // g * silu'(x)
Tensor tanh_backward(const Tensor& y, const Tensor& g);     // g * (1 - y^2)
Tensor sigmoid_backward(const Tensor& y, const Tensor& g);  // g * y * (1 - y)

// ---- softmax along one axis (ops/softmax.cpp) ----
// A row that is -inf everywhere (every key masked) gets softmax 0 everywhere, not NaN.
Tensor softmax(const Tensor& x, int64_t axis);
Tensor log_softmax(const Tensor& x, int64_t axis);
// gx = y * (g - sum(g * y))          (y = softmax output)
Tensor softmax_backward(const Tensor& y, const Tensor& g, int64_t axis);
// gx = g - exp(y) * sum(g)           (y = log_softmax output)
Tensor log_softmax_backward(const Tensor& y, const Tensor& g, int64_t axis);

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

// ---- rms norm (ops/rms_norm.cpp) ----
// x: (..., n) -> y of the same shape; rstd: (...) = 1 / sqrt(mean(x^2) + eps) per row, in x's
// dtype. weight: (n,) or undefined.
struct RmsNormForward {
  Tensor y, rstd;
};
RmsNormForward rms_norm_forward(const Tensor& x, const Tensor& weight, double eps);
struct RmsNormGrads {
  Tensor dx, dweight;
};
RmsNormGrads rms_norm_backward(const Tensor& g, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                               bool want_x, bool want_weight);

// ---- rotary position embedding (ops/rotary.cpp) ----
// The op's one check (std::invalid_argument naming `op` and every shape).
void check_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t offset, const char* op);
// x (B, T, H, D) turned by the angles of positions offset .. offset + T - 1, or turned back
// (inverse: the backward); contiguous (B, T, H, D).
Tensor rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t offset, bool inverse);

// ---- swiglu (ops/swiglu.cpp) ----
Tensor swiglu_forward(const Tensor& gate, const Tensor& up);  // silu(gate) * up
struct SwigluGrads {
  Tensor dgate, dup;
};
SwigluGrads swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up, bool want_gate, bool want_up);

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
// g: (*ids.shape, dim) -> the gradient of the (num, dim) table as the rows it touches: rows
// (U, dim) holds, for each distinct id but padding_idx in order of first appearance (ids[u]),
// the sum of its positions' gradient rows; GradSink::add_rows adds them into the table's
// gradient (the padding row gets nothing). ids must have passed embedding_forward's checks.
struct EmbeddingRows {
  Tensor rows;
  std::vector<int64_t> ids;
};
EmbeddingRows embedding_backward(const Tensor& g, const Indices& ids, int64_t num, int64_t padding_idx);

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
// The same, written over the (contiguous) logits themselves: no second (N, C) buffer.
void cross_entropy_backward_(Tensor& logits, const Tensor& lse, const Indices& targets, int64_t ignore_index,
                             double label_smoothing, const Tensor& row_grad);

// ---- scaled dot-product attention ----
// q: (B, H, Tq, Dk), k: (B, H, Tk, Dk), v: (B, H, Tk, Dv); the mask (autograd/attention_mask.h)
// and the bias (undefined, or broadcastable to (B, H, Tq, Tk) in q's dtype) as the op takes
// them. Operands may be strided views (a (B, T, H, D) tensor permuted to (B, H, T, D) goes to
// BLAS as it lies).
//
// The op's one check of its arguments: operands, mask, bias, dropout probability and scale
// (std::invalid_argument naming scaled_dot_product_attention and every shape). Returns the
// scale to use (options.scale, or 1 / sqrt(Dk) for 0). The kernels below do not check again.
double check_attention_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                                 const Tensor& bias, const AttentionOptions& options);
// The checks of the two attention_backward entry points below (both throw naming every shape):
// the saved operands and statistics against the gradient, or against the given weights.
void check_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& row_max, const Tensor& row_sum, bool want_scores_path);
void check_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& weights, bool want_q, bool want_k, bool want_scores);
// How the per-slice products run (core/prefix_gemm.h): BLAS calls, or direct loops that beat
// BLAS's fixed cost per call on small heads. `automatic` (what the library uses) picks by each
// product's size; tests force each path to hold them equal.
using AttentionPath = PrefixPath;
// weights = softmax over keys of (scale * q k^T + bias) where the mask shows the key (a row
// that sees no key is all zero); output = (weights with `dropout` applied) v.
// row_max, row_sum: the softmax statistics of each query row (softmax_row in core/vec_math.h):
// the maximum of the masked scores and the sum of exp(score - max), -inf and 0 for a row that
// sees no key. With q, k, the mask and the bias they give the weights back bit for bit, on the
// same path.
struct AttentionForward {
  Tensor output;            // (B, H, Tq, Dv)
  Tensor weights;           // (B, H, Tq, Tk), before dropout
  Tensor row_max, row_sum;  // (B, H, Tq)
};
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                                   const Tensor& bias, double scale, const DropoutMask& dropout,
                                   AttentionPath path = AttentionPath::automatic);
// g: (B, H, Tq, Dv), any strides. dscores is the gradient of the pre-softmax scores
// (B, H, Tq, Tk), i.e. of an additive bias before it is summed back to the bias's shape.
// Unwanted gradients stay undefined.
struct AttentionGrads {
  Tensor dq, dk, dv, dscores;
};
// What the op's backward uses: the weights of each (b, h) slice are recomputed into scratch
// from q, k, the mask, the bias and the forward's row statistics (the same code and blocks as
// the forward's, so the same bits when `path` is the forward's), never held as a
// (B, H, Tq, Tk) tensor. Reads q and k always, v only for dq/dk/dscores.
AttentionGrads attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionMask& mask, const Tensor& bias, const Tensor& row_max,
                                  const Tensor& row_sum, double scale, const DropoutMask& dropout, bool want_q,
                                  bool want_k, bool want_v, bool want_scores,
                                  AttentionPath path = AttentionPath::automatic);
// The same maths from given weights (B, H, Tq, Tk), whose zeros past each row's last nonzero
// are skipped: reads q only for dk, k only for dq, v only for dq/dk/dscores. The tests hold the
// two equal bit for bit.
AttentionGrads attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& weights, double scale, const DropoutMask& dropout, bool want_q,
                                  bool want_k, bool want_v, bool want_scores,
                                  AttentionPath path = AttentionPath::automatic);

}  // namespace ag::kernels
