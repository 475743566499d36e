// LayerNorm over the trailing `normalized_shape` dimensions, PyTorch's nn.LayerNorm.
//   x: (..., *normalized_shape) -> same shape; weight (ones) and bias (zeros): normalized_shape
// y = (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance.
// A Sublayer: the default norm of the transformer blocks, which a user's norm may replace.
#pragma once

#include <string>

#include "attograd/layers/module.h"
#include "attograd/layers/sublayer.h"

namespace ag {

struct LayerNormOptions {
  Shape normalized_shape;
  double eps = 1e-5;
  bool elementwise_affine = true;
};

class LayerNorm : public Sublayer {
 public:
  explicit LayerNorm(const LayerNormOptions& options);
  // The common case: normalise over the last dimension of size `features`.
  explicit LayerNorm(int64_t features, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(LayerNormOptions{Shape{features}, eps, elementwise_affine}) {}

  Variable forward(const Variable& x) override;
  Variable operator()(const Variable& x) { return forward(x); }  // the shape cannot change here
  const LayerNormOptions& options() const { return options_; }
  // Undefined Variables when elementwise_affine is false.
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  std::string name() const override { return "LayerNorm" + options_.normalized_shape.str(); }

 private:
  LayerNormOptions options_;
  Variable weight_;  // handles sharing the registered parameters
  Variable bias_;
};

}  // namespace ag
