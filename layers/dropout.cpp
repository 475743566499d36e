#include "attograd/layers/dropout.h"

#include <sstream>
#include <stdexcept>

#include "attograd/autograd/nn_ops.h"

namespace ag {

Dropout::Dropout(const DropoutOptions& options) : options_(options) {
  if (!(options.p >= 0.0 && options.p <= 1.0)) {
    std::ostringstream os;
    os << "Dropout: p must lie in [0, 1], got " << options.p;
    throw std::invalid_argument(os.str());
  }
}

Variable Dropout::forward(const Variable& x) { return dropout(x, options_.p, is_training()); }

std::string Dropout::name() const {
  std::ostringstream os;
  os << "Dropout(p=" << options_.p << ")";
  return os.str();
}

}  // namespace ag
