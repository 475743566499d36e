#include "attograd/layers/layer_norm.h"

#include <sstream>
#include <stdexcept>

#include "attograd/autograd/nn_ops.h"

namespace ag {

LayerNorm::LayerNorm(const LayerNormOptions& options) : options_(options) {
  const Shape& s = options.normalized_shape;
  bool positive = !s.empty();
  for (int64_t d : s) positive = positive && d > 0;
  if (!positive || !(options.eps > 0.0)) {
    std::ostringstream os;
    os << "LayerNorm: normalized_shape must be non-empty with positive sizes and eps > 0, got " << s << " eps "
       << options.eps;
    throw std::invalid_argument(os.str());
  }
  if (options.elementwise_affine) {
    weight_ = register_parameter("weight", ones(s));
    bias_ = register_parameter("bias", zeros(s));
  }
}

Variable LayerNorm::forward(const Variable& x) {
  const Shape& s = options_.normalized_shape;
  bool fits = x.dim() >= s.rank();
  for (int64_t i = 1; i <= s.rank() && fits; ++i) fits = x.shape()[-i] == s[-i];
  if (!fits) {
    throw std::invalid_argument("LayerNorm: input of shape " + x.shape().str() + " does not end in normalized_shape " +
                                s.str());
  }
  if (weight_.defined()) require_dtype(x, weight_.dtype(), "input");
  return layer_norm(x, weight_, bias_, s.rank(), options_.eps);
}

}  // namespace ag
