#include "attograd/layers/activation.h"

#include <stdexcept>
#include <string>

#include "attograd/autograd/ops.h"
#include "attograd/core/format.h"

namespace ag {

constexpr Named<Activation> kActivationNames[] = {{Activation::relu, "relu"}, {Activation::gelu, "gelu"},
                                                    {Activation::gelu_tanh, "gelu_tanh"}};

const char* activation_name(Activation activation) { return name_of(kActivationNames, activation); }

Activation parse_activation(const std::string& name) { return named(kActivationNames, name, "activation"); }

Variable apply_activation(Activation activation, const Variable& x) {
  switch (activation) {
    case Activation::relu: return relu(x);
    case Activation::gelu: return gelu(x);
    case Activation::gelu_tanh: return gelu_tanh(x);
  }
  throw std::logic_error("apply_activation: unknown activation");
}

Variable ReLU::forward(const Variable& x) { return relu(x); }

Variable GELU::forward(const Variable& x) { return gelu(x); }

Variable Softmax::forward(const Variable& x) {
  if (options_.dim < -x.dim() || options_.dim >= x.dim()) {
    throw std::invalid_argument("Softmax: dim " + std::to_string(options_.dim) +
                                " is out of range for input of shape " +
                                x.shape().str());
  }
  return softmax(x, options_.dim);
}

}  // namespace ag
