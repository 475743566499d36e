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
// and "GPTTrainingRun" does the same with a GPT (models/gpt/gpt.h) on next-token batches.
//
// A tensor passes when every element satisfies |actual - expected| <= atol + rtol * |expected|
// (NaN never passes), except in a float32 fixture that carries its float64 reference
// (reference.<name> beside expect.<name>): there attograd's largest error against the float64
// answer may be at most kReferenceFactor times PyTorch's float32 largest error against the same
// answer, plus a floor (compare_with_reference). The tool (tools/torch_parity.cpp) and the test suite
// (tests/parity/test_parity.cpp) both go through run_tool / run_fixture, so the test exercises
// exactly what a user runs.
#pragma once

#include <optional>
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

// float32 against a float64 reference, the way PyTorch's compiler tests judge a float32 result
// (torch._dynamo's `same` with `fp64_ref`): not "close to PyTorch's float32 numbers" but "no
// further from the float64 answer than PyTorch's own float32 result is". Rounding error grows
// with the size of the sums and the values, so a fixed atol that fits d_model 16 can fail a
// correct result at d_model 512; this rule scales with PyTorch's own error instead.
// attograd's largest |actual - reference| may be at most
//   kReferenceFactor * PyTorch's largest |expected - reference|
//   + kReferenceFloor + 2^-23 * max |reference|   (one float32 rounding of the largest value).
// The largest element error, not a root mean square as in torch._dynamo: one element off by
// 1e-4 among 4096 must fail, and an average hides it. A maximum of rounding errors is noisier
// than their mean, hence 3 (torch._dynamo allows 2 on the RMSE, 3 for tensors under 1000
// elements). The floor covers tensors PyTorch happens to compute exactly (a bias gradient that
// is a count) and tensors that are rounding noise around zero. A wrong gradient is off by about
// its own size, far beyond either term, at any size.
inline constexpr double kReferenceFactor = 3.0;
inline constexpr double kReferenceFloor = 1e-6;

struct ReferenceErrors {
  double attograd = 0.0;  // max |actual - reference|
  double pytorch = 0.0;   // max |expected - reference|: PyTorch's float32 rounding
  double allowed = 0.0;   // the bound attograd must stay within
};

struct TensorComparison {
  std::string name;  // "output", "attn_weights", "grad.param.w_q.weight", "grad.input.x", "loss", ...
  Shape shape;       // the expected shape
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;  // |a - e| / |e| over the elements with |e| > atol
  Tolerance tolerance;
  std::optional<ReferenceErrors> reference;  // set when judged against a float64 reference
  bool passed = false;
  std::string problem;  // why it could not be compared (shape mismatch, non-finite value); else empty
};

// Compares element by element; a shape mismatch or a NaN is a failed comparison with a problem.
TensorComparison compare_tensors(const std::string& name, const Tensor& actual, const Tensor& expected,
                                 Tolerance tolerance);
// The same columns against `expected` (PyTorch's float32), but passed by the rule above against
// `reference` (float64, expected's shape).
TensorComparison compare_with_reference(const std::string& name, const Tensor& actual, const Tensor& expected,
                                        const Tensor& reference);

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
