// SwiGLU: the gated feed-forward network of Llama, Qwen and Mistral (Hugging Face's LlamaMLP).
//   x: (..., d_model) -> down_proj(silu(gate_proj(x)) * up_proj(x)) -> (..., d_model)
//   children: gate_proj (d_hidden, d_model), up_proj (d_hidden, d_model),
//             down_proj (d_model, d_hidden), without biases by default
// The gate's product is the fused swiglu op (autograd/nn_ops.h). A Sublayer, so it can take the
// `ff` slot of the library's TransformerBlock (TransformerBlockOptions::make_ff); each
// projection may be replaced by another Linear (a LoRALinear: layers/lora.h).
#pragma once

#include <cstdint>
#include <string>

#include "attograd/layers/linear.h"
#include "attograd/layers/sublayer.h"

namespace ag {

struct SwiGLUOptions {
  int64_t d_model = 0;
  int64_t d_hidden = 0;  // Hugging Face's intermediate_size
  bool bias = false;
};

class SwiGLU : public Sublayer {
 public:
  explicit SwiGLU(const SwiGLUOptions& options);
  SwiGLU(int64_t d_model, int64_t d_hidden) : SwiGLU(SwiGLUOptions{d_model, d_hidden, false}) {}

  Variable forward(const Variable& x) override;
  Variable operator()(const Variable& x) { return forward(x); }  // the shape cannot change here
  const SwiGLUOptions& options() const { return options_; }
  Linear& gate_proj() { return *gate_proj_; }
  Linear& up_proj() { return *up_proj_; }
  Linear& down_proj() { return *down_proj_; }
  std::string name() const override { return "SwiGLU"; }

 private:
  SwiGLUOptions options_;
  Replaceable<Linear> gate_proj_;
  Replaceable<Linear> up_proj_;
  Replaceable<Linear> down_proj_;
};

}  // namespace ag
