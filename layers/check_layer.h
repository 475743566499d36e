// check_layer: the contract every layer keeps, checked in one call.
//
//   Linear fc(3, 4);
//   Variable x(normal({2, 3}, 0.0, 1.0, gen, DType::f64), true, "x");
//   LayerCheckReport r = check_layer(fc, [](Linear& m, const std::vector<Variable>& in) { return m(in[0]); }, {x});
//   if (!r) return 1;  // the table of what failed has already gone to std::cerr
//
// Calling a forward whose signature differs from layer to layer: the caller passes a callable
// `forward(module, inputs) -> Variable`. `inputs` are the differentiable arguments (f64 leaves;
// those with requires_grad are gradient-checked); everything else the forward needs (masks,
// token ids, need_weights) is captured by the callable. The module is an argument rather than
// a capture so that the same callable also runs the freshly built twin of the round-trip check.
// A layer with several outputs returns the one to check.
//
// The rows of the report, each passed, failed or skipped:
//   gradient (train)     gradcheck in train mode on every input that requires grad and every
//                        trainable parameter (dropout sees one fixed mask in every evaluation)
//   gradient (eval)      the same in eval mode; only when the module applies dropout (it or a
//                        descendant says so by Module::draws_random_numbers_in_training())
//   backward adds        with gradients pre-filled, backward leaves prefill + gradient; two
//                        backward passes through one retained graph double the gradients
//   every leaf gets a gradient
//                        one backward reaches every trainable parameter and every input that
//                        requires grad, with finite values (parameters named in `unused` must
//                        get none)
//   every trainable leaf is registered
//                        the autograd graph of one train-mode forward, walked from the output,
//                        reaches no leaf that requires grad other than the module's parameters
//                        and the inputs; a failure names each such leaf (its name, else its shape
//                        and dtype) and the op that consumed it. Such a leaf trains in the
//                        forward but is invisible to the other rows, to state_dict, to() and to
//                        optimizers built from parameters()
//   state_dict round trip
//                        the state_dict, loaded into a perturbed twin built by make_twin (or,
//                        without make_twin, back into the module after perturbing it), gives
//                        bit-identical outputs in train and eval
//   train/eval           without dropout, train and eval outputs are bit-identical; with
//                        dropout they differ, and eval ignores the random generator
//   same seed            the same generator state gives bit-identical outputs and gradients;
//                        with dropout a different state gives a different output; with
//                        make_twin, two modules built after the same manual_seed are identical
//
// Dtype and side effects: the check runs in f64. check_layer converts the module with
// to(DType::f64) for the duration of the check and back afterwards; f32 inputs are replaced by
// f64 copies, f64 inputs are used as they are (pass f64 to check a transposed or sliced
// layout). On return (also by exception) the module's dtype, parameter and buffer values,
// gradients and training mode (set on the whole tree, as train() does), the inputs' gradients
// and the default generator's state are as they were.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attograd/autograd/gradcheck.h"
#include "attograd/layers/module.h"

namespace ag {

struct LayerCheckOptions {
  // Tolerances, step and Jacobian limits of both gradient checks. Its params, zero_ok and
  // check_accumulation fields are ignored: check_layer fills them in.
  GradcheckOptions gradcheck;
  // Parameters whose gradient may be identically zero, by dotted name or by a suffix after a
  // dot ("w_k.bias" matches "blocks.0.attn.w_k.bias"): MultiHeadAttention's key bias, whose
  // gradient softmax cancels. They still receive a (zero) gradient.
  std::vector<std::string> zero_ok;
  // Parameters this forward does not use (a branch the inputs do not take): they must receive
  // no gradient at all. Names as for zero_ok.
  std::vector<std::string> unused;
  // Builds a new module of the same configuration for the round-trip and init checks. Without
  // it the state_dict is loaded back into the module itself.
  std::function<std::unique_ptr<Module>()> make_twin;
  // Whether the module applies dropout in training. Unset: true when the module or one of its
  // descendants returns true from Module::draws_random_numbers_in_training() (Dropout and
  // ScaledDotProductAttention with a rate > 0, or a user's layer that overrides it).
  std::optional<bool> dropout;
  // The default generator is seeded with this before the check's forward passes.
  uint64_t seed = 1234;
  // Where the table goes when a check fails; nullptr keeps it quiet.
  std::ostream* log = &std::cerr;
};

enum class LayerCheckStatus { passed, failed, skipped };

struct LayerCheckRow {
  std::string check;   // "gradient (train)", "backward adds", ...
  LayerCheckStatus status = LayerCheckStatus::passed;
  std::string detail;  // one line: what was compared, or what went wrong
  std::string report;  // failures only: the gradient check's report (several lines) or empty
};

struct LayerCheckReport {
  std::string layer;  // module.name()
  bool ok = true;
  // Over both gradient checks.
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t comparisons = 0;
  std::vector<LayerCheckRow> rows;

  int passed() const;
  int failed() const;
  int checked() const { return passed() + failed(); }  // skipped rows do not count
  // A header line ("check_layer Linear: 6/6 checks passed ...") and one line per row.
  std::string table() const;
  explicit operator bool() const { return ok; }
};

// forward(module, inputs): see the top of this file.
using LayerForward = std::function<Variable(Module& module, const std::vector<Variable>& inputs)>;

// Throws std::invalid_argument when there is nothing to check (no trainable parameter and no
// input that requires grad), for a non-leaf or undefined input, and for a name in zero_ok or
// unused that matches no parameter; std::logic_error when make_twin returns null or a module
// of another type. Exceptions thrown by the forward itself propagate, but for one case: when
// the first f64 forward throws and the module, back in its own dtype, holds an unregistered
// trainable leaf (to(DType::f64) does not convert it, hence a dtype mismatch), the report
// fails "every trainable leaf is registered", naming the leaf and the exception, and skips the
// other rows.
LayerCheckReport check_layer(Module& module, const LayerForward& forward, const std::vector<Variable>& inputs,
                             const LayerCheckOptions& options = {});

// The same for a forward written against the concrete layer type:
//   check_layer(mha, [&](MultiHeadAttention& m, const std::vector<Variable>& in) {
//     return m.forward(in[0], mask).output;
//   }, {x}, options);
template <class M, class F>
  requires(std::derived_from<M, Module> && !std::same_as<M, Module> &&
           std::is_invocable_r_v<Variable, F&, M&, const std::vector<Variable>&>)
LayerCheckReport check_layer(M& module, F forward, const std::vector<Variable>& inputs,
                             const LayerCheckOptions& options = {}) {
  const LayerForward erased = [forward](Module& m, const std::vector<Variable>& in) mutable -> Variable {
    M* typed = dynamic_cast<M*>(&m);
    if (typed == nullptr) {
      throw std::logic_error("check_layer: make_twin built a " + m.name() +
                             ", which is not of the checked layer's type");
    }
    return forward(*typed, in);
  };
  return check_layer(static_cast<Module&>(module), erased, inputs, options);
}

}  // namespace ag
