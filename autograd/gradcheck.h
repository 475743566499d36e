// gradcheck: compares the gradients backward() computes with central differences, in f64.
//
//   auto result = gradcheck([](const std::vector<Variable>& in) { return mul(in[0], in[1]); },
//                           {x, y});
//   if (!result) std::cerr << result.report;
//
// What it checks, for every input that requires grad and every variable in options.params
// (the parameters `fn` closes over, e.g. a module's):
//   * analytic == numeric within |a - n| <= atol + rtol * |n|. Small problems compare the full
//     Jacobian (every input element against every output element); large ones compare
//     directional derivatives along seeded random directions, under seeded random projections
//     of the output;
//   * backward adds: with the gradients pre-filled with random values, backward must leave
//     prefill + gradient behind;
//   * a gradient that is identically zero both analytically and numerically is a failure (a
//     check that cannot fail checks nothing), unless the variable is listed in
//     options.zero_ok (for example a bias that softmax makes irrelevant).
// Random ops inside `fn` see the same default-generator state at every evaluation, so dropout
// draws the same mask in the numeric and analytic passes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attograd/autograd/variable.h"

namespace ag {

struct GradcheckOptions {
  double eps = 1e-6;   // step = eps * max(1, |x|) (relative step)
  double atol = 1e-5;  // PyTorch's defaults
  double rtol = 1e-3;
  // Full Jacobian when the inputs together hold at most this many elements and the output at
  // most max_full_outputs; random projections otherwise.
  int64_t max_full_inputs = 2048;
  int64_t max_full_outputs = 512;
  int projections = 6;       // random output projections in projection mode
  uint64_t seed = 1234;      // for projections, directions and the prefill
  std::vector<Variable> params;   // extra leaves to check (module parameters)
  std::vector<Variable> zero_ok;  // leaves whose gradient may be identically zero
  bool check_accumulation = true;
};

struct GradcheckResult {
  bool ok = true;
  std::string report;  // empty when ok; otherwise one line per problem (at most ~20)
  double max_abs_error = 0;
  double max_rel_error = 0;  // |a - n| / |n| over the comparisons with |n| > atol
  int64_t comparisons = 0;
  bool full_jacobian = false;
  explicit operator bool() const { return ok; }
};

using GradcheckFn = std::function<Variable(const std::vector<Variable>&)>;

// Throws std::invalid_argument for unusable arguments (a non-f64 input or output, a non-leaf
// input, an input with overlapping memory such as an expanded view).
GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Variable>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace ag
