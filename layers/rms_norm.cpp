#include "attograd/layers/rms_norm.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/nn_ops.h"

namespace ag {

namespace {

const RMSNormOptions& checked(const RMSNormOptions& o) {
  if (o.features <= 0 || !(o.eps > 0.0) || !std::isfinite(o.eps)) {
    std::ostringstream os;
    os << "RMSNorm: features and eps must be positive, got features=" << o.features << " eps=" << o.eps;
    throw std::invalid_argument(os.str());
  }
  return o;
}

}  // namespace

RMSNorm::RMSNorm(const RMSNormOptions& options)
    : options_(checked(options)), weight_(register_parameter("weight", ones({options.features}))) {}

Variable RMSNorm::forward(const Variable& x) {
  if (x.dim() < 1 || x.shape()[-1] != options_.features) {
    throw std::invalid_argument("RMSNorm: input of shape " + x.shape().str() + " does not end in features=" +
                                std::to_string(options_.features));
  }
  require_dtype(x, weight_.dtype(), "input");
  return rms_norm(x, weight_, options_.eps);
}

}  // namespace ag
