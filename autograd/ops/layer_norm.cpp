// layer_norm: normalise over the trailing axes, then scale and shift. Forward keeps x, mean and
// rstd (x_hat is rebuilt from them in backward); backward is hand-written in
// kernels::layer_norm_backward.
#include "attograd/autograd/nn_ops.h"
#include "attograd/core/kernels.h"

namespace ag {

Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, int64_t normalized_dims,
                    double eps) {
  // Made contiguous once here: the kernel reads it and backward reads the same copy.
  const Tensor x_val = x.value().contiguous();
  const Tensor w_val = weight.defined() ? weight.value() : Tensor();
  kernels::LayerNormForward f =
      kernels::layer_norm_forward(x_val, w_val, bias.defined() ? bias.value() : Tensor(), normalized_dims, eps);
  // dx and dweight read x, mean and rstd; dx also reads the weight; dbias reads only g.
  const bool grad_x = any_requires_grad({x});
  const bool need_stats = grad_x || any_requires_grad({weight});
  const Tensor x_saved = need_stats ? x_val : Tensor();
  const Tensor mean = need_stats ? f.mean : Tensor();
  const Tensor rstd = need_stats ? f.rstd : Tensor();
  const Tensor w_saved = grad_x ? w_val : Tensor();
  return make_result("layer_norm", std::move(f.y), {x, weight, bias},
                     [x_saved, mean, rstd, w_saved, normalized_dims](const Tensor& g, GradSink& grads) {
                       if (!grads.wants(0) && !grads.wants(1)) {  // only the bias: a column sum of g
                         const int64_t lead = g.dim() - normalized_dims;
                         std::vector<int64_t> axes;
                         for (int64_t d = 0; d < lead; ++d) axes.push_back(d);
                         grads.add(2, axes.empty() ? g : kernels::sum(g, axes));
                         return;
                       }
                       kernels::LayerNormGrads d =
                           kernels::layer_norm_backward(g, x_saved, mean, rstd, w_saved, normalized_dims,
                                                        grads.wants(0), grads.wants(1), grads.wants(2));
                       if (grads.wants(0)) grads.add(0, d.dx);
                       if (grads.wants(1)) grads.add(1, d.dweight);
                       if (grads.wants(2)) grads.add(2, d.dbias);
                     });
}

}  // namespace ag
