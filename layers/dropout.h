// Dropout: inverted dropout in training (kept elements scaled by 1 / (1 - p)), the identity in
// eval. Masks come from default_generator() (seed, step, call), so a run is replayable and a
// gradient check sees the same mask in every evaluation.   x: (...) -> (...)
#pragma once

#include <string>

#include "attograd/layers/module.h"

namespace ag {

struct DropoutOptions {
  double p = 0.5;  // PyTorch's default; must lie in [0, 1]
};

class Dropout : public Module {
 public:
  explicit Dropout(const DropoutOptions& options = {});
  explicit Dropout(double p) : Dropout(DropoutOptions{p}) {}
  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }
  const DropoutOptions& options() const { return options_; }
  std::string name() const override;
  bool draws_random_numbers_in_training() const override { return options_.p > 0.0; }

 private:
  DropoutOptions options_;
};

}  // namespace ag
