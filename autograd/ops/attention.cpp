// scaled_dot_product_attention: scores, mask, softmax, dropout and the value product fused,
// with a hand-written backward (kernels::attention_backward). Saved: the weights (before
// dropout), the dropout key, and of q, k, v only those a wanted gradient reads.
#include <cmath>
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/core/kernels.h"

namespace ag {

AttentionResult scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const Tensor& keep, const Variable& bias,
                                             const AttentionOptions& options) {
  const Tensor bias_val = bias.defined() ? bias.value() : Tensor();
  kernels::check_attention_arguments(q.value(), k.value(), v.value(), keep, bias_val);
  kernels::check_dropout_probability(options.dropout, "scaled_dot_product_attention");
  const int64_t depth = q.shape()[3];
  if (!(options.scale >= 0.0) || !std::isfinite(options.scale) || (options.scale == 0.0 && depth == 0)) {
    throw std::invalid_argument("scaled_dot_product_attention: scale must be finite and >= 0 (0 means 1 / sqrt(Dk)), "
                                "got " + std::to_string(options.scale) + " with q=" + q.shape().str());
  }
  const double scale = options.scale > 0.0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(depth));
  kernels::DropoutMask mask;
  if (options.training && options.dropout > 0.0) {
    Generator& gen = options.generator ? *options.generator : default_generator();
    mask = kernels::DropoutMask{options.dropout, gen.next_stream()};
  }
  kernels::AttentionForward f =
      kernels::attention_forward(q.value(), k.value(), v.value(), keep, bias_val, scale, mask);

  // dq reads k, dk reads q; dq, dk and dbias all go through d scores, which reads v.
  const bool gq = any_requires_grad({q}), gk = any_requires_grad({k});
  const bool through_scores = gq || gk || any_requires_grad({bias});
  const bool any = through_scores || any_requires_grad({v});
  const Tensor q_saved = gk ? q.value() : Tensor();
  const Tensor k_saved = gq ? k.value() : Tensor();
  const Tensor v_saved = through_scores ? v.value() : Tensor();
  const Tensor weights = any ? f.weights : Tensor();
  const Shape bias_shape = bias.defined() ? bias.shape() : Shape();
  Variable output = make_result(
      "scaled_dot_product_attention", std::move(f.output), {q, k, v, bias},
      [q_saved, k_saved, v_saved, weights, scale, mask, bias_shape](const Tensor& g, GradSink& grads) {
        kernels::AttentionGrads d = kernels::attention_backward(g, q_saved, k_saved, v_saved, weights, scale, mask,
                                                                grads.wants(0), grads.wants(1), grads.wants(2),
                                                                grads.wants(3));
        if (grads.wants(0)) grads.add(0, d.dq);
        if (grads.wants(1)) grads.add(1, d.dk);
        if (grads.wants(2)) grads.add(2, d.dv);
        if (grads.wants(3)) grads.add(3, kernels::sum_to(d.dscores, bias_shape));
      });
  return {std::move(output), std::move(f.weights)};
}

}  // namespace ag
