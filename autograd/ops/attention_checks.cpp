// The operand and argument checks of scaled_dot_product_attention, apart from its maths
// (attention.cpp): check_attention_operands is shared with the ScaledDotProductAttention layer.
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"

namespace ag {

void check_attention_operands(const Tensor& q, const Tensor& k, const Tensor& v, const std::string& op) {
  if (!q.defined() || !k.defined() || !v.defined()) {
    throw std::invalid_argument(op + ": q, k and v must all be defined");
  }
  const std::string shapes = "q=" + q.shape().str() + " k=" + k.shape().str() + " v=" + v.shape().str();
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) {
    throw std::invalid_argument(op + ": q, k and v must be 4-D (B, H, T, D): " + shapes);
  }
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype()) {
    throw std::invalid_argument(op + ": dtypes differ: q=" + dtype_name(q.dtype()) + " k=" +
                                dtype_name(k.dtype()) + " v=" + dtype_name(v.dtype()) + " (" + shapes + ")");
  }
  if (q.shape()[0] != k.shape()[0] || q.shape()[0] != v.shape()[0] || q.shape()[1] != k.shape()[1] ||
      q.shape()[1] != v.shape()[1]) {
    throw std::invalid_argument(op + ": batch and head dimensions (B, H) differ: " + shapes);
  }
  if (q.shape()[3] != k.shape()[3]) {
    throw std::invalid_argument(op + ": query and key depths Dk differ: " + shapes);
  }
  if (k.shape()[2] != v.shape()[2]) {
    throw std::invalid_argument(op + ": key and value lengths Tk differ: " + shapes);
  }
}


}  // namespace ag

namespace ag::kernels {

namespace {
constexpr const char* kOp = "scaled_dot_product_attention";
}  // namespace

void check_attention_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& keep,
                               const Tensor& bias) {
  check_attention_operands(q, k, v, kOp);
  const std::string shapes = "q=" + q.shape().str() + " k=" + k.shape().str() + " v=" + v.shape().str();
  const Shape scores{q.shape()[0], q.shape()[1], q.shape()[2], k.shape()[2]};
  if (keep.defined() && !broadcastable_to(keep.shape(), scores)) {
    throw std::invalid_argument(std::string(kOp) + ": keep mask " + keep.shape().str() +
                                " does not broadcast to the scores (B, H, Tq, Tk) = " + scores.str() + " (" + shapes +
                                ")");
  }
  if (bias.defined()) {
    if (!broadcastable_to(bias.shape(), scores)) {
      throw std::invalid_argument(std::string(kOp) + ": bias " + bias.shape().str() +
                                  " does not broadcast to the scores (B, H, Tq, Tk) = " + scores.str() + " (" +
                                  shapes + ")");
    }
    if (bias.dtype() != q.dtype()) {
      throw std::invalid_argument(std::string(kOp) + ": bias " + bias.shape().str() + " has dtype " +
                                  dtype_name(bias.dtype()) + " but q has " + dtype_name(q.dtype()));
    }
  }
}

}  // namespace ag::kernels
