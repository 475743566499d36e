// LoRALinear: a frozen Linear plus a trainable low-rank update (Hu et al., "LoRA", 2021), in the
// convention of Hugging Face's peft:
//   y = x W^T + b + (alpha / r) * (x A^T) B^T
//   x: (..., in) -> (..., out); weight W (out, in) and bias b (out): the base's, frozen
//   lora_a A (r, in): kaiming-uniform as a Linear's weight, U(-1/sqrt(in), 1/sqrt(in))
//   lora_b B (out, r): zeros, so that a freshly wrapped model computes exactly what its base did
// It derives from Linear, so the base's parameters keep their names ("w_q.weight", "w_q.bias":
// a checkpoint of the base loads into the wrapped model) and the adapter's sit beside them
// ("w_q.lora_a", "w_q.lora_b"). Only A and B require grad.
//
// merge() folds the update into the weight, W += (alpha / r) B A, for export and inference;
// a merged layer's forward is the base's alone, and a second merge() is refused, so the update
// is never applied twice. merge_lora() below does this for a whole model and puts plain Linears
// back in place, whose state_dict is the base model's.
//
// apply_lora puts LoRALinears in place of chosen projections of a model: every Linear whose
// dotted path is a target or ends in "." + target (peft's target_modules rule: "w_q" picks
// "blocks.0.attn.w_q" in every block), among the projections their owners hold as
// Replaceable<Linear> (MultiHeadAttention's w_q, w_k, w_v, w_o; PositionwiseFeedForward's
// linear1, linear2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/layers/linear.h"

namespace ag {

struct LoRAOptions {
  int64_t rank = 8;    // r: 1 <= r <= min(in, out)
  double alpha = 8.0;  // the update is scaled by alpha / r (peft's defaults: r 8, alpha 8)
};

class LoRALinear : public Linear {
 public:
  // Wraps a copy of `base`'s weight and bias (frozen), in its dtype; A is drawn from
  // default_generator(). std::invalid_argument naming the layer's sizes for a rank outside
  // [1, min(in, out)] or an alpha that is not finite and positive.
  LoRALinear(const Linear& base, const LoRAOptions& options);

  Variable forward(const Variable& x) override;

  // W += (alpha / r) B A, in place; afterwards forward is the base's alone. std::logic_error
  // when already merged.
  void merge();
  bool merged() const { return merged_; }
  double scaling() const { return options_.alpha / static_cast<double>(options_.rank); }
  const LoRAOptions& lora_options() const { return options_; }
  const Variable& lora_a() const { return lora_a_; }
  const Variable& lora_b() const { return lora_b_; }
  std::string name() const override;

 private:
  LoRAOptions options_;
  Variable lora_a_;
  Variable lora_b_;
  bool merged_ = false;
};

// Replaces every replaceable Linear of `model` that a target names (see above) by a LoRALinear
// wrapping it, in registration order, and returns the paths replaced. std::invalid_argument,
// before anything is replaced, for an empty target list, a target that names no Linear (the
// message lists the Linears there are), or one that names a Linear its owner cannot let go, and
// for a bad rank or alpha (naming the layer).
std::vector<std::string> apply_lora(Module& model, const std::vector<std::string>& targets, const LoRAOptions& options);

// Merges every LoRALinear of `model` (unless merge() was already called on it) and puts a plain
// Linear holding the merged weight in its place (trainable, as a fresh Linear): the model's
// state_dict is then its base's. Returns how many were replaced.
int64_t merge_lora(Module& model);

}  // namespace ag
