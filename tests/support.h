// Helpers shared by the test suites: seeded random tensors and closeness checks.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <sstream>
#include <string>

#include "attograd.h"
#include "attograd/core/parallel.h"

namespace ag::testing {

// A seeded normal f64 leaf that requires grad.
inline Variable randn_leaf(const Shape& shape, uint64_t seed, const std::string& name = {}, DType dtype = DType::f64) {
  Generator gen(seed);
  return Variable(normal(shape, 0.0, 1.0, gen, dtype), true, name);
}

// Restores the thread count a test changed.
struct ThreadCount {
  int saved = num_threads();
  explicit ThreadCount(int n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(saved); }
};

// Makes the pool assume `excess` threads too many for the cores (0: a quiet machine) for a
// test's duration, whatever the machine is doing.
struct MachineLoad {
  explicit MachineLoad(int excess) { detail::force_excess(excess); }
  ~MachineLoad() { detail::force_excess(-1); }
};

// Max |a - b| over all elements; the shapes must match.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  BOOST_REQUIRE_MESSAGE(a.shape() == b.shape(), "shapes differ: " << a.shape() << " vs " << b.shape());
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    const double d = std::abs(va[i] - vb[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

// Runs gradcheck and fails the test with its report when it fails.
inline void check_gradients(const GradcheckFn& fn, const std::vector<Variable>& inputs,
                            const GradcheckOptions& options = {}) {
  const GradcheckResult r = gradcheck(fn, inputs, options);
  BOOST_TEST(r.ok, "gradcheck failed:\n" << r.report);
  BOOST_TEST(r.comparisons > 0);
}

// Expects `statement` to throw `Exception` whose message contains every one of `parts`.
#define AG_CHECK_THROWS_WITH(statement, Exception, ...)                                       \
  do {                                                                                        \
    bool ag_thrown = false;                                                                   \
    try {                                                                                     \
      statement;                                                                              \
    } catch (const Exception& ag_e) {                                                         \
      ag_thrown = true;                                                                       \
      const std::string ag_msg = ag_e.what();                                                 \
      for (const std::string& ag_part : std::initializer_list<std::string>{__VA_ARGS__}) {    \
        BOOST_TEST(ag_msg.find(ag_part) != std::string::npos,                                 \
                   "message '" << ag_msg << "' lacks '" << ag_part << "'");                   \
      }                                                                                       \
    }                                                                                         \
    BOOST_TEST(ag_thrown, #statement " did not throw " #Exception);                           \
  } while (0)

}  // namespace ag::testing
