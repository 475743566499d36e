// RMSNorm over the last dimension, the norm of Llama, Qwen and Mistral (Hugging Face's
// LlamaRMSNorm): x: (..., features) -> same shape; weight (ones): (features,)
//   y = x / sqrt(mean(x^2) + eps) * weight
// A Sublayer, so it can take a norm slot of the library's blocks (TransformerBlockOptions::
// make_norm). The op is rms_norm in autograd/nn_ops.h.
#pragma once

#include <cstdint>
#include <string>

#include "attograd/layers/sublayer.h"

namespace ag {

struct RMSNormOptions {
  int64_t features = 0;
  double eps = 1e-6;
};

class RMSNorm : public Sublayer {
 public:
  explicit RMSNorm(const RMSNormOptions& options);
  explicit RMSNorm(int64_t features, double eps = 1e-6) : RMSNorm(RMSNormOptions{features, eps}) {}

  Variable forward(const Variable& x) override;
  Variable operator()(const Variable& x) { return forward(x); }  // the shape cannot change here
  const RMSNormOptions& options() const { return options_; }
  const Variable& weight() const { return weight_; }
  std::string name() const override { return "RMSNorm(" + std::to_string(options_.features) + ")"; }

 private:
  RMSNormOptions options_;
  Variable& weight_;
};

}  // namespace ag
