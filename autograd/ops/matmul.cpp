// Matrix products. For C = A B:  dA = dC B^T,  dB = A^T dC, each summed back over batch
// dimensions that broadcasting stretched. Transposes are views: BLAS reads them with
// CblasTrans, nothing is copied.
#include "attograd/autograd/ops.h"
#include "attograd/core/kernels.h"

namespace ag {

Variable matmul(const Variable& a, const Variable& b) {
  // (..., M, K) @ (K, N): fold the batch into M, one large product instead of many small ones.
  if (a.dim() > 2 && b.dim() == 2 && a.value().is_contiguous()) {
    if (a.dtype() != b.dtype()) {  // checked here so that the message shows a's shape before folding
      throw std::invalid_argument(std::string("matmul: dtypes differ: a=") + dtype_name(a.dtype()) + " " +
                                  a.shape().str() + " b=" + dtype_name(b.dtype()) + " " + b.shape().str());
    }
    Shape out_shape(std::vector<int64_t>(a.shape().begin(), a.shape().end() - 1));
    out_shape.push_back(b.shape()[-1]);
    if (a.shape()[-1] != b.shape()[-2]) {
      throw std::invalid_argument("matmul: inner dimensions differ: a=" + a.shape().str() + " b=" + b.shape().str());
    }
    return reshape(matmul(reshape(a, {-1, a.shape()[-1]}), b), out_shape);
  }
  const Tensor a_val = a.value();
  const Tensor b_val = b.value();
  return make_result("matmul", kernels::matmul(a_val, b_val), {a, b}, [a_val, b_val](const Tensor& g, GradSink& grads) {
    if (grads.wants(0)) grads.add(0, kernels::sum_to(kernels::matmul(g, b_val.t()), a_val.shape()));
    if (grads.wants(1)) grads.add(1, kernels::sum_to(kernels::matmul(a_val.t(), g), b_val.shape()));
  });
}

}  // namespace ag
