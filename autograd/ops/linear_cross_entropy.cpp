// linear_cross_entropy: a vocabulary head and its cross-entropy in one op, computed a chunk of
// rows at a time so that the (N, V) logits never exist whole, neither in forward nor in
// backward. With a 50,257-token vocabulary the logits of 8 x 256 positions are 411 MB in f32,
// twice that with their gradient; a chunk of 160 rows holds 32 MB.
//
// For rows r of a chunk:  logits_r = h_r W^T,  loss_r = lse_r - logits_r[t_r]  (cross_entropy's
// kernels, label smoothing included). Forward keeps only each row's log-sum-exp; backward
// recomputes the chunk's logits from h and W (one product more than keeping them) and turns
// them into the gradient in place:
//   dlogits = g_r (softmax - onehot),  dh_chunk = dlogits W,  dW += dlogits^T h_chunk
// With one chunk this is, operation for operation, cross_entropy(linear(h, W), t).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"

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

}  // namespace

int64_t linear_cross_entropy_chunk(int64_t vocab, int64_t budget_elements) {
  return std::max<int64_t>(1, budget_elements / std::max<int64_t>(vocab, 1));
}

Variable linear_cross_entropy(const Variable& h, const Variable& weight, const Indices& targets,
                              const LinearCrossEntropyOptions& options) {
  check_arguments(h, weight, targets, options);
  const int64_t d = weight.shape()[1];
  const int64_t rows = targets.numel();
  const Tensor h2 = h.value().contiguous().view({rows, d});
  const Tensor w = weight.value();
  const int64_t chunk = std::min(options.chunk_rows, std::max<int64_t>(rows, 1));

  // Each chunk's logits, their losses and log-sum-exps; the losses are summed in f64 (as
  // cross_entropy sums its rows), the log-sum-exps kept for backward.
  Tensor lse(Shape{rows}, h.dtype());
  double total = 0;
  int64_t counted = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    const Indices t = targets_range(targets, r0, n);
    const Tensor logits = kernels::matmul(h2.narrow(0, r0, n), w.t());
    const kernels::CrossEntropyForward f =
        kernels::cross_entropy_forward(logits, t, options.ignore_index, options.label_smoothing);
    total += kernels::sum(f.losses.to(DType::f64), {}).item();
    Tensor part = lse.narrow(0, r0, n);
    part.copy_(f.lse);
    for (int64_t i = 0; i < n; ++i) counted += t[i] != options.ignore_index ? 1 : 0;
  }
  const double value = options.reduction == Reduction::sum ? total
                       : counted > 0                       ? total / static_cast<double>(counted)
                                                           : 0.0;
  Tensor out = scalar(value, h.dtype());
  if (!any_requires_grad({h, weight})) return Variable(std::move(out));

  return make_result(
      "linear_cross_entropy", std::move(out), {h, weight},
      [h2, w, lse, targets, options, counted, rows, chunk, shape = h.shape()](const Tensor& g, GradSink& grads) {
        if (options.reduction == Reduction::mean && counted == 0) {
          if (grads.wants(0)) grads.add(0, zeros(shape, g.dtype()));
          if (grads.wants(1)) grads.add(1, zeros(w.shape(), g.dtype()));
          return;
        }
        const double scale = options.reduction == Reduction::mean ? 1.0 / static_cast<double>(counted) : 1.0;
        const Tensor row_grad = kernels::affine(g, scale, 0.0).reshape({1});
        Tensor dh = grads.wants(0) ? zeros(Shape{rows, w.shape()[1]}, g.dtype()) : Tensor();
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
          const int64_t n = std::min(chunk, rows - r0);
          const Tensor hc = h2.narrow(0, r0, n);
          const Tensor dlogits = kernels::cross_entropy_backward(
              kernels::matmul(hc, w.t()), lse.narrow(0, r0, n), targets_range(targets, r0, n), options.ignore_index,
              options.label_smoothing, row_grad.expand({n}));
          if (grads.wants(1)) grads.add_matmul(1, dlogits.t(), hc);
          if (grads.wants(0)) {
            Tensor part = dh.narrow(0, r0, n);
            kernels::matmul_add_(part, dlogits, w);
          }
        }
        if (grads.wants(0)) grads.add(0, std::move(dh).view(shape));
      });
}

}  // namespace ag
