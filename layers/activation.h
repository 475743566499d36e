// Parameter-free layers: ReLU, GELU (exact erf form, PyTorch's default) and Softmax along a
// dimension. Each keeps its input's shape: x: (...) -> (...). Activation names the nonlinearity
// of a feed-forward block, GPT-2's tanh-approximated GELU among them.
#pragma once

#include <cstdint>
#include <string>

#include "attograd/layers/module.h"

namespace ag {

// Which nonlinearity a feed-forward block uses.
// gelu: the exact erf form; gelu_tanh: GPT-2's tanh approximation (ops.h).
enum class Activation { relu, gelu, gelu_tanh };
const char* activation_name(Activation activation);
// Inverse of activation_name; std::invalid_argument listing the choices otherwise.
Activation parse_activation(const std::string& name);
Variable apply_activation(Activation activation, const Variable& x);

class ReLU : public Module {
 public:
  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }
  std::string name() const override { return "ReLU"; }
};

class GELU : public Module {
 public:
  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }
  std::string name() const override { return "GELU"; }
};

struct SoftmaxOptions {
  int64_t dim = -1;
};

class Softmax : public Module {
 public:
  explicit Softmax(const SoftmaxOptions& options = {}) : options_(options) {}
  explicit Softmax(int64_t dim) : Softmax(SoftmaxOptions{dim}) {}
  // Axis `dim` must exist in x (std::invalid_argument otherwise).
  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }
  const SoftmaxOptions& options() const { return options_; }
  std::string name() const override { return "Softmax(dim=" + std::to_string(options_.dim) + ")"; }

 private:
  SoftmaxOptions options_;
};

}  // namespace ag
