// PyTorch parity: runs a fixture (fixture.h, docs/parity.md) through attograd and compares
// every result with what PyTorch computed from the same weights and inputs.
//
//   FixtureResult r = run_fixture(Fixture::load("tests/parity/fixtures/mha_a_keep_mask_f64.safetensors"));
//   print_result(std::cout, r);            // one row per tensor: shape, max abs/rel error, pass/fail
//   bool same = r.passed();
//
// For an ordinary module the runner builds it from `config`, converts it to the fixture's dtype,
// loads param.* with load_state_dict (strict), sets train/eval, runs forward on input.* (and the
// masks), backward with grad.output, and compares output, attention weights or logits, the
// gradient of every parameter and of every floating input. The module "TrainingRun" instead
// trains a SequenceModel with AdamW on the stored batches and compares the loss at every step,
// and "GPTTrainingRun" does the same with a GPT (models/gpt.h) on next-token batches.
//
// A tensor passes when every element satisfies |actual - expected| <= atol + rtol * |expected|
// (NaN never passes). The tool (examples/torch_parity.cpp) and the test suite
// (tests/parity/test_parity.cpp) both go through run_tool / run_fixture, so the test exercises
// exactly what a user runs.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "attograd/core/dtype.h"
#include "attograd/core/shape.h"
#include "attograd/core/tensor.h"
#include "fixture.h"

namespace ag::parity {

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

// float64: atol 1e-10, rtol 1e-8. float32: atol 1e-5, rtol 1e-4.
Tolerance tolerance_for(DType dtype);
// The loss trajectory of a float32 TrainingRun: 1e-4 absolute at every step (float64 runs use
// tolerance_for(f64)).
inline constexpr double kTrainingLossAtol = 1e-4;

struct TensorComparison {
  std::string name;  // "output", "attn_weights", "grad.param.w_q.weight", "grad.input.x", "loss", ...
  Shape shape;       // the expected shape
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;  // |a - e| / |e| over the elements with |e| > atol
  Tolerance tolerance;
  bool passed = false;
  std::string problem;  // why it could not be compared (shape mismatch, non-finite value); else empty
};

// Compares element by element; a shape mismatch or a NaN is a failed comparison with a problem.
TensorComparison compare_tensors(const std::string& name, const Tensor& actual, const Tensor& expected,
                                 Tolerance tolerance);

struct FixtureResult {
  std::string label;   // the file
  std::string module;  // metadata module
  std::string dtype;   // "float32" / "float64"
  std::string mode;    // "train" / "eval"
  std::string note;    // metadata note (e.g. why an expectation is not PyTorch's raw NaN)
  std::vector<TensorComparison> comparisons;
  // At least one comparison, and every one passed.
  bool passed() const;
};

// The modules run_fixture knows, in documentation order.
const std::vector<std::string>& supported_modules();

// Runs one fixture. Throws FixtureError when the fixture is malformed: metadata, config or
// tensors missing, unknown or inconsistent, parameters that do not fit the configured module,
// train-mode dropout, or a gradient the fixture does not state.
FixtureResult run_fixture(const Fixture& fixture);

// The table for one fixture.
void print_result(std::ostream& out, const FixtureResult& result);

// The torch_parity command line: `torch_parity [--quiet] FILE...`. Prints a table per fixture and
// a summary to `out`, malformed fixtures to `err`. Returns 0 when every tensor of every fixture
// passed, 2 when some fixture was malformed (or the command line was wrong), 1 otherwise.
int run_tool(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ag::parity
