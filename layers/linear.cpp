#include "attograd/layers/linear.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"

namespace ag {

namespace {

const LinearOptions& checked(const LinearOptions& o) {
  if (o.in_features <= 0 || o.out_features <= 0) {
    throw std::invalid_argument("Linear: in_features and out_features must be positive, got in=" +
                                std::to_string(o.in_features) + " out=" + std::to_string(o.out_features));
  }
  Shape{o.out_features, o.in_features}.checked_numel("Linear weight");  // before anything is allocated
  return o;
}

double bound(const LinearOptions& o) { return 1.0 / std::sqrt(static_cast<double>(o.in_features)); }

}  // namespace

Linear::Linear(const LinearOptions& options)
    : options_(checked(options)),
      weight_(register_parameter("weight", uniform({options.out_features, options.in_features}, -bound(options),
                                                   bound(options)))) {
  if (options_.bias) {
    bias_ = register_parameter("bias", uniform({options_.out_features}, -bound(options_), bound(options_)));
  }
}

Linear::Linear(const LinearOptions& options, const Tensor& weight, const Tensor& bias, bool trainable)
    : options_(checked(options)) {
  const Shape want_weight{options_.out_features, options_.in_features};
  const bool weight_ok = weight.defined() && weight.shape() == want_weight;
  const bool bias_ok = options_.bias ? bias.defined() && bias.shape() == Shape{options_.out_features} : !bias.defined();
  if (!weight_ok || !bias_ok || (bias.defined() && bias.dtype() != weight.dtype())) {
    throw std::invalid_argument("Linear: for in=" + std::to_string(options_.in_features) + " out=" +
                                std::to_string(options_.out_features) + (options_.bias ? " with" : " without") +
                                " bias, got weight " + (weight.defined() ? weight.shape().str() : "undefined") +
                                " and bias " + (bias.defined() ? bias.shape().str() : "undefined") +
                                " (of one dtype)");
  }
  weight_ = register_parameter("weight", weight, trainable);
  if (options_.bias) bias_ = register_parameter("bias", bias, trainable);
}

Variable Linear::forward(const Variable& x) {
  if (x.dim() < 1 || x.shape()[-1] != options_.in_features) {
    throw std::invalid_argument("Linear: input of shape " + x.shape().str() + " does not end in in_features=" +
                                std::to_string(options_.in_features) + " (weight " + weight_.shape().str() + ")");
  }
  require_dtype(x, weight_.dtype(), "input");
  if (is_quantized()) return quantized_linear(x, quantized_, weight_, bias_);
  // One fused op (one product, bias added inside it) instead of matmul, transpose and add.
  return linear(x, weight_, bias_);
}

void Linear::quantize_weights(WeightFormat format) {
  if (weight_.dtype() != DType::f32) {
    throw std::invalid_argument("Linear::quantize_weights: '" + weight_.name() + "' " + weight_.shape().str() + " is " +
                                dtype_name(weight_.dtype()) + "; " + format_name(format) +
                                " weights serve float32 models only (to(DType::f32) first)");
  }
  quantized_ = quantize(weight_.value(), format);
}

}  // namespace ag
