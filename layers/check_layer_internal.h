// check_layer's insides, shared by its two source files and not installed:
//   check_layer.cpp       validates the arguments, keeps the module's state, runs the rows in
//                         the order below, and returns the report;
//   check_layer_rows.cpp  one LayerChecker member per row, the comparisons they make, and the
//                         walk over the autograd graph that finds unregistered leaves.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attograd/layers/check_layer.h"

namespace ag::check_layer_detail {

// The rows in the order of the report; check_layer.h and docs/extending.md describe each.
inline constexpr const char* kGradientTrain = "gradient (train)";
inline constexpr const char* kGradientEval = "gradient (eval)";
inline constexpr const char* kBackwardAdds = "backward adds";
inline constexpr const char* kEveryLeaf = "every leaf gets a gradient";
inline constexpr const char* kRegistered = "every trainable leaf is registered";
inline constexpr const char* kRoundTrip = "state_dict round trip";
inline constexpr const char* kTrainEval = "train/eval";
inline constexpr const char* kSameSeed = "same seed";
inline constexpr const char* kRowOrder[] = {kGradientTrain, kGradientEval, kBackwardAdds, kEveryLeaf,
                                            kRegistered,    kRoundTrip,    kTrainEval,    kSameSeed};

// Generator states tried when looking for a dropout mask that drops something: with few
// elements and a small rate one mask may keep everything, sixteen in a row almost never do.
inline constexpr uint64_t kDropoutStates = 16;

std::string joined(const std::vector<std::string>& items, const char* separator = ", ");
// Copies of every parameter and buffer, by dotted name.
StateDict snapshot(const Module& m);

class LayerChecker {
 public:
  LayerChecker(Module& module, const LayerForward& forward, const LayerCheckOptions& options)
      : module_(module), forward_(forward), opt_(options) {}

  LayerCheckReport run(const std::vector<Variable>& inputs);

 private:
  GeneratorState state(uint64_t step) const { return GeneratorState{opt_.seed, step, 0}; }
  std::string where() const { return "check_layer (" + module_.name() + "): "; }
  Variable run_forward(Module& m, bool training, const GeneratorState& s, const std::vector<Variable>& inputs);
  Variable run_forward(Module& m, bool training, const GeneratorState& s) {
    return run_forward(m, training, s, inputs_);
  }
  // A copy: a forward may return its input (dropout in eval) or a view of it.
  Tensor output(Module& m, bool training, const GeneratorState& s);
  // Leaf gradients (undefined where none arrived) after `passes` backward passes with
  // cotangent u through one graph built in train mode from cleared gradients.
  std::vector<Tensor> backward_grads(const Tensor& u, int passes);
  std::unique_ptr<Module> build_twin(uint64_t seed);

  void setup(const std::vector<Variable>& inputs);
  std::vector<Variable> resolve(const std::vector<std::string>& names, const char* option) const;
  // The registration row for a forward that throws in f64, found in the module's own dtype;
  // nullopt when that finds no unregistered leaf either.
  std::optional<LayerCheckRow> unregistered_in_own_dtype(const std::vector<Variable>& given);
  // The report when the forward cannot run in f64 because of an unregistered leaf: that row
  // fails, the others are not run.
  LayerCheckReport stopped(LayerCheckRow cause, const std::string& error);

  // One per row, in check_layer_rows.cpp.
  LayerCheckRow gradient_row(bool training);
  LayerCheckRow accumulation_row(const Tensor& u, const std::vector<Tensor>& fresh);
  LayerCheckRow reach_row(const std::vector<Tensor>& fresh) const;
  LayerCheckRow registration_row(const std::vector<Variable>& inputs);
  LayerCheckRow round_trip_row();
  LayerCheckRow train_eval_row();
  LayerCheckRow seed_row(const Tensor& u, const std::vector<Tensor>& fresh);

  Module& module_;
  const LayerForward& forward_;
  const LayerCheckOptions& opt_;
  std::vector<Variable> inputs_;         // f64
  std::vector<Variable> caller_inputs_;  // the f64 inputs used as they are (their grads are restored)
  std::vector<Variable> leaves_;         // inputs that require grad, then trainable parameters
  std::vector<std::string> labels_;      // parallel to leaves_
  std::vector<bool> unused_;             // parallel to leaves_
  std::vector<Variable> params_;
  std::vector<Variable> zero_ok_;        // zero_ok and unused parameters, for gradcheck
  std::optional<DType> own_dtype_;       // the module's before the check; none without tensors
  bool dropout_ = false;
  Shape out_shape_;
  LayerCheckReport report_;
};

}  // namespace ag::check_layer_detail
