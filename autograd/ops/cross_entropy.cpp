// cross_entropy: log-softmax and NLL fused over the last axis, with ignore_index, label
// smoothing and the three reductions. Forward keeps the (flattened) logits and each row's
// log-sum-exp; backward rebuilds the softmax from them in one pass.
//
// Mean reduction divides by the number of non-ignored targets. When every target is ignored,
// PyTorch returns NaN (0 / 0); we return 0 with a zero gradient instead, so a batch made only of
// padding cannot poison a training run.
//
// The kernels:
// Cross-entropy with class-index targets: log-softmax and the negative log-likelihood fused,
// one pass per row for the statistics and none for log-probabilities (never materialised).
//
// With lse = log sum_j exp(x_j) and label smoothing ls over C classes (PyTorch's definition:
// the target distribution is (1 - ls) one_hot(t) + ls / C):
//   loss = (1 - ls) * (lse - x_t) + ls * (lse - mean_j x_j)
//   d loss / d x_j = softmax_j - (1 - ls) [j == t] - ls / C
// Backward rebuilds softmax_j = exp(x_j - lse) from the logits and the saved lse.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"
#include "attograd/core/parallel.h"
#include "attograd/core/vec_math.h"

namespace ag::kernels {

namespace {

// Flops per logit, roughly (an exp and a few adds), for parallel_chunks.
constexpr double kRowWork = 20;

void check_arguments(const Tensor& logits, const Indices& targets, int64_t ignore_index, double label_smoothing) {
  if (!logits.defined()) throw std::invalid_argument("cross_entropy: the logits tensor is undefined");
  if (logits.dim() != 2 || logits.shape()[1] < 1 || targets.numel() != logits.shape()[0]) {
    throw std::invalid_argument("cross_entropy: logits must be (N, C) with C >= 1 and one target per row: logits " +
                                logits.shape().str() + " targets " + targets.shape.str());
  }
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
    throw std::invalid_argument("cross_entropy: label_smoothing must be in [0, 1], got " +
                                std::to_string(label_smoothing));
  }
  const int64_t classes = logits.shape()[1];
  for (int64_t r = 0; r < targets.numel(); ++r) {
    const int64_t t = targets[r];
    if (t == ignore_index || (t >= 0 && t < classes)) continue;
    // Report the position in the caller's target shape, not the flattened row.
    std::vector<int64_t> idx(static_cast<size_t>(targets.shape.rank()));
    int64_t flat = r;
    for (int64_t d = targets.shape.rank() - 1; d >= 0; --d) {
      idx[static_cast<size_t>(d)] = flat % targets.shape[d];
      flat /= targets.shape[d];
    }
    throw std::invalid_argument("cross_entropy: target " + std::to_string(t) + " at position " +
                                Shape(std::move(idx)).str() + " of targets " + targets.shape.str() +
                                " is out of range for " + std::to_string(classes) + " classes (ignore_index " +
                                std::to_string(ignore_index) + ")");
  }
}

}  // namespace

CrossEntropyForward cross_entropy_forward(const Tensor& logits_in, const Indices& targets, int64_t ignore_index,
                                          double label_smoothing) {
  check_arguments(logits_in, targets, ignore_index, label_smoothing);
  const Tensor logits = logits_in.contiguous();
  const int64_t rows = logits.shape()[0];
  const int64_t classes = logits.shape()[1];
  CrossEntropyForward out{Tensor(Shape{rows}, logits.dtype()), Tensor(Shape{rows}, logits.dtype())};
  dispatch(logits.dtype(), [&]<typename T>(T) {
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
    const T* px = logits.data<T>();
    T* ploss = out.losses.data<T>();
    T* plse = out.lse.data<T>();
    const Acc ls = static_cast<Acc>(label_smoothing);
    // Rows are independent: each thread takes whole rows, so any thread count gives the same bits.
    parallel_for(rows, parallel_chunks(rows, kRowWork * static_cast<double>(rows * classes)),
                 [&](int64_t first, int64_t last) {
      constexpr int64_t kChunk = 256;
      T e[kChunk];
      for (int64_t r = first; r < last; ++r) {
        const int64_t t = targets[r];
        if (t == ignore_index) {
          ploss[r] = 0;
          plse[r] = 0;  // never read: ignored rows get no gradient
          continue;
        }
        const T* x = px + r * classes;
        const T mx = row_max(x, classes);  // for f32 vectorised; the same value in any order
        // The exps go through a small buffer so that their loop vectorises for f32 (no running
        // sum inside); the sums then run in the same order as one fused loop would.
        Acc total = 0;
        for (int64_t j0 = 0; j0 < classes; j0 += kChunk) {
          const int64_t len = std::min(kChunk, classes - j0);
          exp_row(x + j0, e, len, mx);
          for (int64_t j = 0; j < len; ++j) total += static_cast<Acc>(e[j]);
        }
        const Acc lse = static_cast<Acc>(mx) + std::log(total);
        Acc loss = lse - static_cast<Acc>(x[t]);
        if (ls > 0) {  // the mean of the logits only matters with smoothing
          Acc sum_x = 0;
          for (int64_t j = 0; j < classes; ++j) sum_x += static_cast<Acc>(x[j]);
          loss = (1 - ls) * loss + ls * (lse - sum_x / static_cast<Acc>(classes));
        }
        ploss[r] = static_cast<T>(loss);
        plse[r] = static_cast<T>(lse);
      }
    });
  });
  return out;
}

namespace {

// The gradient of the rows of contiguous `logits` into `dx` (which may be `logits` itself:
// each element is read once, before its own gradient is written over it).
void write_cross_entropy_grad(const Tensor& logits, const Tensor& lse_in, const Indices& targets,
                              int64_t ignore_index, double label_smoothing, const Tensor& row_grad, Tensor& dx) {
  check_arguments(logits, targets, ignore_index, label_smoothing);
  const int64_t rows = logits.shape()[0];
  const int64_t classes = logits.shape()[1];
  if (lse_in.shape() != Shape{rows} || !row_grad.defined() || row_grad.shape() != Shape{rows}) {
    throw std::invalid_argument("cross_entropy_backward: lse " + lse_in.shape().str() + " and row gradient " +
                                (row_grad.defined() ? row_grad.shape().str() : std::string("undefined")) +
                                " must both be (" + std::to_string(rows) + ",) for logits " +
                                logits.shape().str());
  }
  const Tensor lse = lse_in.contiguous();
  dispatch(logits.dtype(), [&]<typename T>(T) {
    const T* px = logits.data<T>();
    const T* plse = lse.data<T>();
    const T* pg = row_grad.data<T>();
    const int64_t g_stride = row_grad.strides()[0];  // 0 for a scalar expanded over the rows
    T* pd = dx.data<T>();
    const T smooth = static_cast<T>(label_smoothing / static_cast<double>(classes));
    const T hit = static_cast<T>(1.0 - label_smoothing);
    parallel_for(rows, parallel_chunks(rows, kRowWork * static_cast<double>(rows * classes)),
                 [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        T* d = pd + r * classes;
        const int64_t t = targets[r];
        if (t == ignore_index) {
          std::fill(d, d + classes, T(0));
          continue;
        }
        const T* x = px + r * classes;
        const T g = pg[r * g_stride];
        const T l = plse[r];
        exp_row(x, d, classes, l);  // softmax_j, then the gradient in place
        for (int64_t j = 0; j < classes; ++j) d[j] = g * (d[j] - smooth);
        d[t] -= g * hit;
      }
    });
  });
}

}  // namespace

Tensor cross_entropy_backward(const Tensor& logits_in, const Tensor& lse, const Indices& targets,
                              int64_t ignore_index, double label_smoothing, const Tensor& row_grad) {
  if (!logits_in.defined()) throw std::invalid_argument("cross_entropy: the logits tensor is undefined");
  const Tensor logits = logits_in.contiguous();
  Tensor dx(logits.shape(), logits.dtype());
  write_cross_entropy_grad(logits, lse, targets, ignore_index, label_smoothing, row_grad, dx);
  return dx;
}

void cross_entropy_backward_(Tensor& logits, const Tensor& lse, const Indices& targets, int64_t ignore_index,
                             double label_smoothing, const Tensor& row_grad) {
  if (!logits.defined() || !logits.is_contiguous()) {
    throw std::invalid_argument("cross_entropy_backward_: the logits must be a contiguous tensor, got " +
                                (logits.defined() ? logits.shape().str() + " (non-contiguous)" : std::string("undefined")));
  }
  write_cross_entropy_grad(logits, lse, targets, ignore_index, label_smoothing, row_grad, logits);
}

}  // namespace ag::kernels

namespace ag {

Variable cross_entropy(const Variable& logits, const Indices& targets, const CrossEntropyOptions& options) {
  const Shape& shape = logits.shape();
  if (logits.dim() < 1 || shape[-1] < 1) {
    throw std::invalid_argument("cross_entropy: logits must be (..., C) with at least one class, got " + shape.str());
  }
  const Shape expected(std::vector<int64_t>(shape.begin(), shape.end() - 1));
  if (targets.shape != expected) {
    throw std::invalid_argument("cross_entropy: targets " + targets.shape.str() + " must have the logits' shape " +
                                "without the class axis: logits " + shape.str() + " expects targets " +
                                expected.str());
  }
  const int64_t classes = shape[-1];
  const Tensor flat = logits.value().reshape({-1, classes});  // (N, C), contiguous
  kernels::CrossEntropyForward f =
      kernels::cross_entropy_forward(flat, targets, options.ignore_index, options.label_smoothing);
  const int64_t rows = flat.shape()[0];
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) counted += targets[r] != options.ignore_index ? 1 : 0;

  Tensor out;
  if (options.reduction == Reduction::none) {
    out = f.losses.view(expected);
  } else {
    const double total = kernels::sum(f.losses.to(DType::f64), {}).item();  // summed in f64 whatever the dtype
    const double value = options.reduction == Reduction::sum ? total
                         : counted > 0                       ? total / static_cast<double>(counted)
                                                             : 0.0;
    out = scalar(value, logits.dtype());
  }

  const bool save = any_requires_grad({logits});
  const Tensor flat_saved = save ? flat : Tensor();
  const Tensor lse = save ? f.lse : Tensor();
  Indices targets_saved = save ? targets : Indices();
  return make_result(
      "cross_entropy", std::move(out), {logits},
      [flat_saved, lse, targets_saved = std::move(targets_saved), options, counted, rows,
       shape](const Tensor& g, GradSink& grads) {
        Tensor row_grad;  // d loss / d loss_row, one per row
        switch (options.reduction) {
          case Reduction::none: row_grad = g.reshape({rows}); break;
          case Reduction::sum: row_grad = g.reshape({1}).expand({rows}); break;
          case Reduction::mean:
            if (counted == 0) {
              grads.add(0, zeros(shape, g.dtype()));
              return;
            }
            row_grad = kernels::affine(g, 1.0 / static_cast<double>(counted), 0.0).reshape({1}).expand({rows});
            break;
        }
        const Tensor dx = kernels::cross_entropy_backward(flat_saved, lse, targets_saved, options.ignore_index,
                                                          options.label_smoothing, row_grad);
        grads.add(0, dx.view(shape));
      });
}

}  // namespace ag
