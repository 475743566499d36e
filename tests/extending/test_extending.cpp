// Suite 'extending': a user's layer meets check_layer, written as a user would write it, from the
// umbrella header alone. A trainable tensor kept without register_parameter is invisible to
// state_dict, to() and optimizers, and every other row passes without seeing it: the
// registration row is what names it. Registered, the same layer passes every row.
#include <boost/test/unit_test.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attograd.h"

namespace {

using namespace ag;

constexpr const char* kRegistered = "every trainable leaf is registered";

// x: (..., n) -> (..., n), x * weight * gain, with the gain registered as a parameter.
class GainedScale : public Module {
 public:
  explicit GainedScale(int64_t n)
      : weight_(register_parameter("weight", uniform({n}, 0.5, 1.5))), gain_(register_parameter("gain", ones({n}))) {}
  Variable forward(const Variable& x) { return x * weight_ * gain_; }
  std::string name() const override { return "GainedScale"; }

 private:
  Variable& weight_;
  Variable& gain_;
};

// The same layer with the gain kept as a plain member: it trains (requires_grad) but is not
// registered, so to(DType::f64) leaves it in the dtype it was made in.
class ForgetfulGainedScale : public Module {
 public:
  ForgetfulGainedScale(int64_t n, DType gain_dtype, std::string gain_name)
      : weight_(register_parameter("weight", uniform({n}, 0.5, 1.5))),
        gain_(ones({n}, gain_dtype), /*requires_grad=*/true, std::move(gain_name)) {}
  Variable forward(const Variable& x) { return x * weight_ * gain_; }
  std::string name() const override { return "ForgetfulGainedScale"; }

 private:
  Variable& weight_;
  Variable gain_;
};

Variable input(const Shape& shape) {
  Generator gen(17);
  return Variable(normal(shape, 0.0, 1.0, gen, DType::f64), /*requires_grad=*/true, "x");
}

LayerCheckOptions quiet() {
  LayerCheckOptions options;
  options.log = nullptr;
  return options;
}

const LayerCheckRow& row_of(const LayerCheckReport& report, const std::string& check) {
  for (const LayerCheckRow& row : report.rows) {
    if (row.check == check) return row;
  }
  BOOST_FAIL("no row '" << check << "' in\n" << report.table());
  throw std::logic_error("unreachable");
}

LayerCheckReport check_forgetful(DType gain_dtype, const std::string& gain_name) {
  manual_seed(3);
  ForgetfulGainedScale layer(4, gain_dtype, gain_name);
  const auto forward = [](ForgetfulGainedScale& m, const std::vector<Variable>& in) { return m.forward(in[0]); };
  LayerCheckReport report = check_layer(layer, forward, {input({2, 4})}, quiet());
  // Whatever the report, the layer is back as it was built.
  BOOST_TEST(layer.named_parameters().front().second.dtype() == DType::f32);
  return report;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(extending)

BOOST_AUTO_TEST_CASE(an_unregistered_gain_fails_check_layer_naming_it) {
  // In f32, as written above: the f64 forward cannot even run, and the report says why rather
  // than passing on a dtype mismatch.
  const LayerCheckReport r = check_forgetful(DType::f32, "gain");
  BOOST_TEST(!r.ok);
  BOOST_TEST((row_of(r, kRegistered).status == LayerCheckStatus::failed), r.table());
  BOOST_TEST(r.failed() == 1, r.table());
  const std::string& detail = row_of(r, kRegistered).detail;
  BOOST_TEST(detail.find("trainable leaf 'gain' (4,) f32") != std::string::npos, r.table());
  BOOST_TEST(detail.find("neither a parameter of ForgetfulGainedScale nor an input") != std::string::npos, r.table());
  BOOST_TEST(detail.find("register it with register_parameter") != std::string::npos, r.table());
  BOOST_TEST(r.table().find("'gain'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_unregistered_f64_gain_fails_only_the_registration_row) {
  // Made in f64, the forward runs after to(DType::f64), and every other row passes: gradcheck
  // never perturbs the gain, and the state_dict never held it.
  const LayerCheckReport r = check_forgetful(DType::f64, "gain");
  BOOST_TEST(!r.ok);
  BOOST_TEST(r.failed() == 1, r.table());
  BOOST_TEST((row_of(r, kRegistered).status == LayerCheckStatus::failed), r.table());
  BOOST_TEST(row_of(r, kRegistered).detail.find("trainable leaf 'gain' (4,) f64") != std::string::npos, r.table());
  BOOST_TEST((row_of(r, "state_dict round trip").status == LayerCheckStatus::passed), r.table());
}

BOOST_AUTO_TEST_CASE(an_unnamed_unregistered_leaf_is_told_by_shape_and_dtype) {
  const LayerCheckReport r = check_forgetful(DType::f64, "");
  BOOST_TEST((row_of(r, kRegistered).status == LayerCheckStatus::failed), r.table());
  BOOST_TEST(row_of(r, kRegistered).detail.find("an unnamed trainable leaf (4,) f64, consumed by '") !=
                 std::string::npos,
             r.table());
}

BOOST_AUTO_TEST_CASE(the_same_layer_with_the_gain_registered_passes_every_row) {
  manual_seed(3);
  GainedScale layer(4);
  LayerCheckOptions options = quiet();
  options.make_twin = [] { return std::make_unique<GainedScale>(4); };
  const auto forward = [](GainedScale& m, const std::vector<Variable>& in) { return m.forward(in[0]); };
  const LayerCheckReport r = check_layer(layer, forward, {input({2, 4})}, options);
  BOOST_TEST(r.ok, r.table());
  BOOST_TEST(r.failed() == 0, r.table());
  BOOST_TEST(r.passed() == 7, r.table());  // every row but "gradient (eval)": no dropout
  BOOST_TEST((row_of(r, kRegistered).status == LayerCheckStatus::passed), r.table());
  // x, weight and gain.
  BOOST_TEST(row_of(r, kRegistered).detail.find("3 trainable leaves") != std::string::npos, r.table());
}

BOOST_AUTO_TEST_SUITE_END()
