#include "attograd/layers/swiglu.h"

#include <stdexcept>

#include "attograd/autograd/nn_ops.h"

namespace ag {

namespace {

const SwiGLUOptions& checked(const SwiGLUOptions& o) {
  if (o.d_model <= 0 || o.d_hidden <= 0) {
    throw std::invalid_argument("SwiGLU: d_model and d_hidden must be positive, got d_model=" +
                                std::to_string(o.d_model) + " d_hidden=" + std::to_string(o.d_hidden));
  }
  return o;
}

std::unique_ptr<Linear> projection(int64_t in, int64_t out, bool bias) {
  return std::make_unique<Linear>(LinearOptions{in, out, bias});
}

}  // namespace

SwiGLU::SwiGLU(const SwiGLUOptions& options)
    : options_(checked(options)),
      gate_proj_(register_replaceable("gate_proj", projection(options.d_model, options.d_hidden, options.bias))),
      up_proj_(register_replaceable("up_proj", projection(options.d_model, options.d_hidden, options.bias))),
      down_proj_(register_replaceable("down_proj", projection(options.d_hidden, options.d_model, options.bias))) {}

Variable SwiGLU::forward(const Variable& x) {
  if (x.dim() < 1 || x.shape()[-1] != options_.d_model) {
    throw std::invalid_argument("SwiGLU: input of shape " + x.shape().str() + " does not end in d_model=" +
                                std::to_string(options_.d_model));
  }
  return down_proj_->forward(swiglu(gate_proj_->forward(x), up_proj_->forward(x)));
}

}  // namespace ag
