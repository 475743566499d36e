// linear_cross_entropy: a vocabulary head and its cross-entropy in one op, computed a chunk of
// rows at a time so that the (N, V) logits never exist whole, neither in forward nor in
// backward. With a 50,257-token vocabulary the logits of 8 x 256 positions are 411 MB in f32,
// twice that with their gradient; a chunk of 288 rows holds 58 MB, turned into its own gradient
// in place.
//
// For rows r of a chunk:  logits_r = h_r W^T,  loss_r = lse_r - logits_r[t_r]  (cross_entropy's
// kernels, label smoothing included), and with g_r the gradient of the loss row
// (1/counted for a mean, 1 for a sum, times the gradient of the op's result):
//   dlogits = g_r (softmax - onehot),  dh_chunk = dlogits W,  dW += dlogits^T h_chunk
// With one chunk this is, operation for operation, cross_entropy(linear(h, W), t).
//
// When the op is recorded for backward, forward goes on to the gradients while each chunk's
// logits are still at hand, as if the result's gradient were 1, and keeps dh and dW. Keeping
// only the log-sum-exps instead would cost backward a second product per chunk to rebuild the
// logits: at GPT-2's 50,257 x 768 head, a third of the head's products. The price is that dW
// (the size of W) exists from this forward on rather than from its backward; the loss is the
// graph's last op, so that is when backward starts anyway. Backward hands the two over, or for
// a result gradient g != 1 (loss * 1/K under gradient accumulation) scales them by g first:
// then the gradients equal the direct computation's up to rounding; for g = 1 they are its bits.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"
#include "attograd/core/parallel.h"

namespace ag {

namespace {

void check_arguments(const Variable& h, const Variable& weight, const Indices& targets,
                     const LinearCrossEntropyOptions& o) {
  const char* op = "linear_cross_entropy";
  if (!h.defined() || !weight.defined()) throw std::invalid_argument(std::string(op) + ": h and weight must be defined");
  const std::string shapes = "h " + h.shape().str() + ", weight " + weight.shape().str() + ", targets " +
                             targets.shape.str();
  if (weight.dim() != 2 || weight.shape()[0] < 1 || h.dim() < 1 || h.shape()[-1] != weight.shape()[1]) {
    throw std::invalid_argument(std::string(op) + ": expected h (..., d) and weight (V, d) with V >= 1, got " + shapes);
  }
  const Shape expected(std::vector<int64_t>(h.shape().begin(), h.shape().end() - 1));
  if (targets.shape != expected) {
    throw std::invalid_argument(std::string(op) + ": targets must have h's shape without its last axis, " +
                                expected.str() + ", got " + shapes);
  }
  if (h.dtype() != weight.dtype()) {
    throw std::invalid_argument(std::string(op) + ": dtypes differ: h " + dtype_name(h.dtype()) + ", weight " +
                                dtype_name(weight.dtype()));
  }
  const int64_t vocab = weight.shape()[0];
  for (int64_t i = 0; i < targets.numel(); ++i) {
    const int64_t t = targets[i];
    if (t != o.ignore_index && (t < 0 || t >= vocab)) {
      throw std::invalid_argument(std::string(op) + ": target " + std::to_string(t) + " at flat position " +
                                  std::to_string(i) + " of targets " + targets.shape.str() + " is outside [0, " +
                                  std::to_string(vocab) + ") (ignore_index " + std::to_string(o.ignore_index) + ")");
    }
  }
  if (o.chunk_rows < 1) {
    throw std::invalid_argument(std::string(op) + ": chunk_rows must be at least 1, got " + std::to_string(o.chunk_rows));
  }
  if (o.reduction == Reduction::none) {
    throw std::invalid_argument(std::string(op) + ": reduction none is not supported (the per-row losses of a " +
                                "whole batch are what this op avoids keeping); use mean or sum");
  }
}

// Entries [begin, begin + n) of the flattened targets, as (n,).
Indices targets_range(const Indices& targets, int64_t begin, int64_t n) {
  const auto first = targets.data.begin() + begin;
  return Indices(Shape{n}, std::vector<int64_t>(first, first + n));
}

// Hands a gradient computed for a result gradient of 1 to input i, as `shape`, times the
// actual result gradient g (a scalar) unless g is 1. Without retain_graph the op's reference is
// dropped first, so a first gradient takes the tensor over instead of copying it, and a scaling
// happens in place; with it, the tensor stays as it is for the next pass.
void hand_over(GradSink& grads, size_t i, Tensor& grad, const Tensor& g, const Shape& shape) {
  if (!grads.wants(i) || !grad.defined()) return;
  const double factor = g.item();
  Tensor out = grad;
  if (!grads.graph_retained()) grad = Tensor();
  if (factor != 1.0) {
    if (grads.graph_retained()) {
      out = kernels::affine(out, factor, 0.0);
    } else {
      dispatch(out.dtype(), [&]<typename T>(T) {  // as affine computes it: v * g + 0
        T* p = out.data<T>();
        const T s = static_cast<T>(factor);
        const int64_t n = out.numel();
        parallel_for(n, parallel_chunks(n, static_cast<double>(n)), [&](int64_t begin, int64_t end) {
          for (int64_t k = begin; k < end; ++k) p[k] = p[k] * s + T(0);
        });
      });
    }
  }
  out = out.view(shape);
  grads.add(i, std::move(out));
}

}  // namespace

int64_t linear_cross_entropy_chunk(int64_t vocab, int64_t budget_elements) {
  const int64_t rows = std::max<int64_t>(1, budget_elements / std::max<int64_t>(vocab, 1));
  // The products cut their rows for the threads at multiples of gemm_row_alignment() (12 or
  // 48, core/gemm.h): a multiple of 96 rows gives two threads equal halves with either.
  constexpr int64_t kEvenRows = 96;
  return rows >= kEvenRows ? rows / kEvenRows * kEvenRows : rows;
}

Variable linear_cross_entropy(const Variable& h, const Variable& weight, const Indices& targets,
                              const LinearCrossEntropyOptions& options) {
  check_arguments(h, weight, targets, options);
  const int64_t d = weight.shape()[1];
  const int64_t rows = targets.numel();
  const Tensor h2 = h.value().contiguous().view({rows, d});
  const Tensor w = weight.value();
  const int64_t chunk = std::min(options.chunk_rows, std::max<int64_t>(rows, 1));
  int64_t counted = 0;
  for (int64_t i = 0; i < rows; ++i) counted += targets[i] != options.ignore_index ? 1 : 0;

  const bool record = any_requires_grad({h, weight});
  const bool want_h = record && h.requires_grad(), want_w = record && weight.requires_grad();
  // Zero when a mean has nothing to average (or there are no rows), else written by the chunks.
  const bool gradients = (want_h || want_w) && rows > 0 && !(options.reduction == Reduction::mean && counted == 0);
  // The gradients for a result gradient of 1, allocated before any chunk's logits, so that
  // their memory is not what a freed chunk leaves in the block cache (core/storage.h): in the
  // other order the 124M step's peak RSS was about 80 MB higher. Each chunk's products write
  // them (dW: the first chunk's product, then the others added; dh: each chunk its own rows).
  const auto gradient = [&](const Shape& shape) {
    return gradients ? Tensor(shape, h.dtype()) : zeros(shape, h.dtype());
  };
  Tensor dh = want_h ? gradient(Shape{rows, d}) : Tensor();
  Tensor dw = want_w ? gradient(w.shape()) : Tensor();
  const double scale = options.reduction == Reduction::mean ? 1.0 / static_cast<double>(std::max<int64_t>(counted, 1))
                                                            : 1.0;
  // d loss / d loss_row, as cross_entropy's backward computes it for a result gradient of 1.
  const Tensor row_grad = kernels::affine(scalar(1.0, h.dtype()), scale, 0.0).reshape({1});

  // Each chunk's logits, their losses and (when recording) gradients; the losses are summed in
  // f64, as cross_entropy sums its rows.
  double total = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    const Indices t = targets_range(targets, r0, n);
    const Tensor hc = h2.narrow(0, r0, n);
    Tensor logits = kernels::matmul(hc, w.t());
    const kernels::CrossEntropyForward f =
        kernels::cross_entropy_forward(logits, t, options.ignore_index, options.label_smoothing);
    total += kernels::sum(f.losses.to(DType::f64), {}).item();
    if (!gradients) continue;
    // The logits become their own gradient: one (n, V) buffer per chunk, not two.
    kernels::cross_entropy_backward_(logits, f.lse, t, options.ignore_index, options.label_smoothing,
                                     row_grad.expand({n}));
    const Tensor& dlogits = logits;
    if (want_w) {
      if (r0 == 0) kernels::matmul_into_(dw, dlogits.t(), hc);
      else kernels::matmul_add_(dw, dlogits.t(), hc);
    }
    if (want_h) {
      Tensor part = dh.narrow(0, r0, n);
      kernels::matmul_into_(part, dlogits, w);
    }
  }
  const double value = options.reduction == Reduction::sum ? total
                       : counted > 0                       ? total / static_cast<double>(counted)
                                                           : 0.0;
  Tensor out = scalar(value, h.dtype());
  if (!record) return Variable(std::move(out));

  return make_result("linear_cross_entropy", std::move(out), {h, weight},
                     [dh = std::move(dh), dw = std::move(dw), shape = h.shape()](const Tensor& g,
                                                                                  GradSink& grads) mutable {
                       hand_over(grads, 0, dh, g, shape);
                       hand_over(grads, 1, dw, g, dw.defined() ? dw.shape() : Shape());
                     });
}

}  // namespace ag
