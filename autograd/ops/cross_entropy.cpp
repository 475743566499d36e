// cross_entropy: log-softmax and NLL fused over the last axis, with ignore_index, label
// smoothing and the three reductions. Forward keeps the (flattened) logits and each row's
// log-sum-exp; backward rebuilds the softmax from them in one pass.
//
// Mean reduction divides by the number of non-ignored targets. When every target is ignored,
// PyTorch returns NaN (0 / 0); we return 0 with a zero gradient instead, so a batch made only of
// padding cannot poison a training run.
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/core/kernels.h"

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
