// PositionwiseFeedForward: the same two-layer network applied at every position.
//   x: (..., d_model) -> linear1 -> activation -> dropout -> linear2 -> (..., d_model)
//   children: linear1 (d_hidden, d_model), linear2 (d_model, d_hidden), dropout
// The residual connection and the LayerNorm around it belong to the transformer block, whose
// default `ff` slot this is (a Sublayer: a user's feed-forward network may take its place).
#pragma once

#include <cstdint>
#include <string>

#include "attograd/layers/activation.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/linear.h"
#include "attograd/layers/module.h"
#include "attograd/layers/sublayer.h"

namespace ag {

struct PositionwiseFeedForwardOptions {
  int64_t d_model = 0;
  int64_t d_hidden = 2048;  // PyTorch's dim_feedforward default
  Activation activation = Activation::relu;
  double dropout = 0.1;  // PyTorch's default, between the activation and linear2
  bool bias = true;
};

class PositionwiseFeedForward : public Sublayer {
 public:
  explicit PositionwiseFeedForward(const PositionwiseFeedForwardOptions& options);
  PositionwiseFeedForward(int64_t d_model, int64_t d_hidden, Activation activation = Activation::relu,
                          double dropout = 0.1)
      : PositionwiseFeedForward(PositionwiseFeedForwardOptions{d_model, d_hidden, activation, dropout, true}) {}

  Variable forward(const Variable& x) override;
  Variable operator()(const Variable& x) { return forward(x); }  // the shape cannot change here
  const PositionwiseFeedForwardOptions& options() const { return options_; }
  // Each may be replaced by another Linear (a LoRALinear: layers/lora.h).
  Linear& linear1() { return *linear1_; }
  Linear& linear2() { return *linear2_; }
  std::string name() const override;

 private:
  PositionwiseFeedForwardOptions options_;
  Replaceable<Linear> linear1_;
  Dropout& dropout_;
  Replaceable<Linear> linear2_;
};

}  // namespace ag
