// Linear: y = x W^T + b, PyTorch's nn.Linear.
//   x: (..., in_features) -> (..., out_features); weight: (out, in); bias: (out)
// Init as PyTorch: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming-uniform with
// a = sqrt(5)), drawn from default_generator().
//
// forward is virtual so that a layer computing more than x W^T + b from the same weight (a
// LoRALinear, layers/lora.h) can take a Linear's place in the layers that hold their
// projections as Replaceable<Linear> (attention, feed-forward).
#pragma once

#include <cstdint>

#include "attograd/core/quantize.h"
#include "attograd/layers/module.h"

namespace ag {

struct LinearOptions {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
};

class Linear : public Module {
 public:
  explicit Linear(const LinearOptions& options);
  Linear(int64_t in_features, int64_t out_features, bool bias = true)
      : Linear(LinearOptions{in_features, out_features, bias}) {}
  // A Linear holding copies of `weight` (out, in) and `bias` (out; undefined without a bias),
  // in their dtype, nothing drawn from the generator; `trainable` false registers them frozen
  // (requires_grad false). std::invalid_argument naming the shapes when they do not match.
  Linear(const LinearOptions& options, const Tensor& weight, const Tensor& bias, bool trainable = true);

  virtual Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }

  const LinearOptions& options() const { return options_; }
  // Handles sharing the registered parameters; bias() is undefined when options().bias is false.
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  std::string name() const override { return "Linear"; }

  // Inference only: from now on forward multiplies by a quantized copy of the weight (int8 or
  // q4_0: blocks of 32 values along `in`, one scale each; core/quantize.h) instead of reading
  // the float32 weight, which stays registered and unchanged (state_dict and checkpoints still
  // hold it; the copy adds 28% of its bytes in int8, 14% in q4_0). A forward that would need
  // gradients then throws std::logic_error naming the weight (autograd's quantized_linear).
  // Quantize last: a later to() or load_state_dict changes the float weight only (to(f64) makes
  // forward throw; a load leaves the quantized copy stale). std::invalid_argument naming the
  // weight unless it is float32.
  void quantize_weights(WeightFormat format = WeightFormat::int8);
  bool is_quantized() const { return !quantized_.empty(); }
  const QuantizedMatrix& quantized_weight() const { return quantized_; }

 private:
  LinearOptions options_;
  Variable weight_;
  Variable bias_;
  QuantizedMatrix quantized_;  // empty unless quantize_weights() was called
};

}  // namespace ag
