// embedding: a row gather; backward scatter-adds the output gradient into a dense (num, dim)
// weight gradient. Only the ids are saved.
#include "attograd/autograd/nn_ops.h"
#include "attograd/core/kernels.h"

namespace ag {

Variable embedding(const Variable& weight, const Indices& ids, int64_t padding_idx) {
  Tensor out = kernels::embedding_forward(weight.value(), ids, padding_idx);  // validates ids and padding_idx
  const int64_t num = weight.shape()[0];
  Indices saved = any_requires_grad({weight}) ? ids : Indices();
  return make_result("embedding", std::move(out), {weight},
                     [saved = std::move(saved), num, padding_idx](const Tensor& g, GradSink& grads) {
                       grads.add(0, kernels::embedding_backward(g, saved, num, padding_idx));
                     });
}

}  // namespace ag
