// Optimizers over named parameters: SGD (momentum, dampening, Nesterov, weight decay), Adam and
// AdamW, each following PyTorch 1.13's update rule exactly (the single-tensor path of
// torch.optim, in the same order of operations), so a run can be compared step by step with
// PyTorch (tests/train/test_optim.cpp holds values recorded from it).
//
//   AdamW opt(model.named_parameters(), {.lr = 1e-3, .weight_decay = 0.01});
//   loss.backward();
//   opt.step();        // updates every parameter whose grad is defined, under NoGradGuard
//   opt.zero_grad();
//
// Contract:
//   * parameters are leaves with requires_grad, contiguous, with unique names and unique
//     variables (std::invalid_argument at construction otherwise);
//   * a parameter whose grad is undefined is skipped: its value and its state do not change
//     (PyTorch skips `p.grad is None` the same way); with zero_grad(false) grads become zeros
//     instead, and zero-grad parameters are then updated (decay, momentum) as in PyTorch;
//   * weight decay applies to every parameter but those named in the options' `no_decay` (each
//     must be one of the parameters): PyTorch's parameter groups with weight_decay 0, as GPT-2's
//     recipe leaves biases, norms and embeddings alone;
//   * state is per parameter and created at the parameter's first update; state() and
//     load_state() export and import it by parameter name for checkpoints;
//   * updates are computed in the parameter's own dtype (f32 training, f64 tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/autograd/variable.h"

namespace ag {

// Bounds that load_state() enforces on state read from a file: a step count far beyond any run
// (Adam's bias correction stays exact and the next increment cannot overflow), and state values
// far outside anything training produces (|momentum|, |exp_avg| <= 1e20, exp_avg_sq <= 1e40,
// the same bound as checkpoint.h's kMaxParameterMagnitude, squared).
inline constexpr int64_t kMaxOptimizerStep = int64_t{1} << 53;
inline constexpr double kMaxStateMagnitude = 1e20;

// What an optimizer remembers about one parameter. Tensors have the parameter's shape and dtype;
// the ones an optimizer does not use stay undefined.
struct ParamState {
  int64_t step = 0;        // updates applied to this parameter (Adam's bias correction reads it)
  Tensor momentum_buffer;  // SGD with momentum != 0
  Tensor exp_avg;          // Adam, AdamW: first moment
  Tensor exp_avg_sq;       // Adam, AdamW: second moment
};

// The state of every parameter that has been updated at least once, by parameter name.
using OptimizerState = std::vector<std::pair<std::string, ParamState>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter whose gradient is defined.
  void step();
  // set_to_none = true drops the gradients (the next backward starts afresh; PyTorch 2's
  // default); false fills existing gradients with zeros (PyTorch 1.13's default).
  void zero_grad(bool set_to_none = true);

  double lr() const { return lr_; }
  void set_lr(double lr);  // lr >= 0; schedules call it before each step

  const NamedVariables& params() const { return params_; }
  // "SGD", "Adam" or "AdamW": stored in checkpoints and compared on load.
  virtual const char* name() const = 0;
  // The state slots this optimizer keeps (after its first update) for a parameter.
  virtual std::vector<std::string> state_slots() const = 0;

  OptimizerState state() const;
  // Replaces the whole state. Validates before changing anything: every name must be one of
  // the parameters, 1 <= step <= kMaxOptimizerStep, exactly this optimizer's slots defined, each
  // with the parameter's shape and dtype and with finite values within kMaxStateMagnitude
  // (exp_avg_sq >= 0). Parameters absent from `state` get fresh state. Throws
  // std::invalid_argument naming the parameter and the problem.
  void load_state(const OptimizerState& state);

 protected:
  Optimizer(NamedVariables params, double lr, const char* kind, const std::vector<std::string>& no_decay);
  // Applies one update to `param` (contiguous) from `grad` (contiguous, same shape and dtype),
  // with the options' weight decay when `decay` (false for the parameters named in no_decay).
  // `state.step` has already been incremented.
  virtual void update(Tensor& param, const Tensor& grad, ParamState& state, bool decay) = 0;

 private:
  NamedVariables params_;
  std::vector<ParamState> states_;  // parallel to params_
  std::vector<bool> decays_;        // parallel to params_: not named in no_decay
  double lr_ = 0;
};

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2 penalty added to the gradient
  bool nesterov = false;      // needs momentum > 0 and dampening == 0
  std::vector<std::string> no_decay{};  // parameters without weight decay
};

// grad' = grad + wd * p;  buf = grad' (first step) or momentum * buf + (1 - dampening) * grad';
// direction = nesterov ? grad' + momentum * buf : buf (grad' when momentum == 0);  p -= lr * direction
class SGD : public Optimizer {
 public:
  SGD(NamedVariables params, const SGDOptions& options);
  const char* name() const override { return "SGD"; }
  std::vector<std::string> state_slots() const override;
  const SGDOptions& options() const { return options_; }

 private:
  void update(Tensor& param, const Tensor& grad, ParamState& state, bool decay) override;
  SGDOptions options_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Adam: L2 added to the gradient; AdamW: decoupled, p *= 1 - lr * wd
  std::vector<std::string> no_decay{};  // parameters without weight decay
};

// t = step; g' = g + wd * p (Adam only);  m = beta1 m + (1 - beta1) g';  v = beta2 v + (1 - beta2) g'^2
// p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)      (eps outside the sqrt)
class Adam : public Optimizer {
 public:
  Adam(NamedVariables params, const AdamOptions& options);
  const char* name() const override { return "Adam"; }
  std::vector<std::string> state_slots() const override { return {"exp_avg", "exp_avg_sq"}; }
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(NamedVariables params, const AdamOptions& options, const char* kind);
  void update(Tensor& param, const Tensor& grad, ParamState& state, bool decay) override;
  AdamOptions options_;
  bool decoupled_ = false;
};

// AdamOptions with PyTorch's AdamW defaults (weight_decay 0.01).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  std::vector<std::string> no_decay{};  // parameters without weight decay
};

// Adam with decoupled weight decay (Loshchilov & Hutter): p *= 1 - lr * wd before the Adam
// step, and the gradient is left alone.
class AdamW : public Adam {
 public:
  AdamW(NamedVariables params, const AdamWOptions& options);
  const char* name() const override { return "AdamW"; }
};

}  // namespace ag
