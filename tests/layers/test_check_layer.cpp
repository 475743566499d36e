// check_layer: built-in layers pass every row, and each row fails for the bug it exists to
// catch (a wrong backward, a forward that resets gradients, an unused parameter, an unregistered
// trainable leaf, state outside the state_dict, a mode-dependent branch, dropout that ignores the
// mode, private randomness, an unseeded init); a layer that drops out by itself says so. The
// module, the inputs and the generator are left as they were.
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "layer_support.h"

namespace ag::testing {
namespace {

const LayerCheckRow& row_of(const LayerCheckReport& report, const std::string& check) {
  for (const LayerCheckRow& r : report.rows) {
    if (r.check == check) return r;
  }
  BOOST_FAIL("no row '" << check << "' in\n" << report.table());
  throw std::logic_error("unreachable");
}

LayerCheckStatus status_of(const LayerCheckReport& report, const std::string& check) {
  return row_of(report, check).status;
}

// Every check ran and only `check` failed.
void expect_only_failure(const LayerCheckReport& report, const std::string& check) {
  BOOST_TEST(!report.ok);
  BOOST_TEST(report.failed() == 1, report.table());
  BOOST_TEST((status_of(report, check) == LayerCheckStatus::failed), report.table());
}

LayerCheckOptions quiet() {
  LayerCheckOptions o;
  o.log = nullptr;
  return o;
}

Variable linear_forward(Linear& m, const std::vector<Variable>& in) { return m(in[0]); }

// Identity forward with a backward 1.5 times too large.
Variable overscaled_identity(const Variable& x) {
  return make_result("overscaled_identity", x.value().clone(), {x},
                     [](const Tensor& g, GradSink& grads) { grads.add(0, kernels::affine(g, 1.5, 0.0)); });
}

// x: (..., 3) -> (..., 3), x * weight with a per-layer twist selected by `Bug`.
enum class Bug {
  wrong_backward, zeroes_grads, spare_parameter, unregistered_scale, hidden_state, mode_branch, always_drops, own_noise
};

class Buggy : public Module {
 public:
  explicit Buggy(Bug bug) : bug_(bug), weight_(register_parameter("weight", uniform({3}, 0.5, 1.5))) {
    if (bug == Bug::spare_parameter) register_parameter("spare", ones({3}));
    // Drawn from the default generator like an init, but never registered.
    if (bug == Bug::hidden_state) hidden_ = uniform({3}, -1.0, 1.0, default_generator(), DType::f64);
  }
  Variable forward(const Variable& x) {
    switch (bug_) {
      case Bug::wrong_backward: return overscaled_identity(x * weight_);
      case Bug::zeroes_grads: weight_.zero_grad(); return x * weight_;
      case Bug::spare_parameter: return x * weight_;
      case Bug::unregistered_scale: return x * weight_ * scale_;
      case Bug::hidden_state: return x * weight_ + Variable(hidden_);
      case Bug::mode_branch: return is_training() ? x * weight_ : x * weight_ * 0.5;
      case Bug::always_drops: return dropout(x * weight_, 0.5, /*training=*/true);
      case Bug::own_noise: return x * weight_ + Variable(normal(x.shape(), 0.0, 1.0, noise_, DType::f64));
    }
    throw std::logic_error("Buggy: unknown bug");
  }
  std::string name() const override { return "Buggy"; }

 private:
  Bug bug_;
  Variable& weight_;
  Tensor hidden_;
  // Trains, never registered; f64 so the forward runs after to(f64) (f32: tests/extending).
  Variable scale_{ones({3}, DType::f64), /*requires_grad=*/true, "scale"};
  Generator noise_{7};
};

// x: (..., 3) -> (..., 3), dropout(x * weight) through the functional op: no Dropout child,
// so only what the layer says of itself tells check_layer that it draws random numbers.
class OwnDropout : public Module {
 public:
  explicit OwnDropout(double p) : p_(p), weight_(register_parameter("weight", uniform({3}, 0.5, 1.5))) {}
  Variable forward(const Variable& x) { return dropout(x * weight_, p_, is_training()); }
  std::string name() const override { return "OwnDropout"; }

 protected:
  double p_;
  Variable& weight_;
};

class DeclaredOwnDropout : public OwnDropout {
 public:
  using OwnDropout::OwnDropout;
  bool draws_random_numbers_in_training() const override { return p_ > 0.0; }
};

template <class M>
LayerCheckReport check_own_dropout(double p, LayerCheckOptions options = quiet()) {
  manual_seed(21);
  M m(p);
  options.make_twin = [p] { return std::make_unique<M>(p); };
  const auto fwd = [](M& layer, const std::vector<Variable>& in) { return layer.forward(in[0]); };
  return check_layer(m, fwd, {randn_leaf({4, 3}, 22, "x")}, options);
}

LayerCheckReport check_buggy(Bug bug, LayerCheckOptions options = quiet()) {
  Buggy m(bug);
  options.make_twin = [bug] { return std::make_unique<Buggy>(bug); };
  const Variable x = randn_leaf({2, 3}, 11, "x");
  return check_layer(m, [](Buggy& b, const std::vector<Variable>& in) { return b.forward(in[0]); }, {x}, options);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(check_layer_contract)

BOOST_AUTO_TEST_CASE(linear_passes_every_row_and_reports_the_errors) {
  manual_seed(1);
  Linear lin(3, 4);
  LayerCheckOptions options = quiet();
  options.make_twin = [] { return std::make_unique<Linear>(3, 4); };
  const LayerCheckReport r = check_layer(lin, linear_forward, {randn_leaf({2, 3}, 2, "x")}, options);
  BOOST_TEST(r.ok, r.table());
  BOOST_TEST(r.layer == "Linear");
  BOOST_TEST(r.rows.size() == 8u);
  BOOST_TEST(r.passed() == 7);
  BOOST_TEST((status_of(r, "gradient (eval)") == LayerCheckStatus::skipped));
  BOOST_TEST(r.comparisons == 8 * (6 + 12 + 4));  // outputs x (input + weight + bias elements)
  BOOST_TEST(r.max_abs_error < 1e-7);
  BOOST_TEST(r.table().find("check_layer Linear: passed, 7/7 checks passed") != std::string::npos, r.table());
  BOOST_TEST(row_of(r, "every trainable leaf is registered").detail.find("3 trainable leaves") != std::string::npos,
             r.table());
  BOOST_TEST(row_of(r, "state_dict round trip").detail.find("twin") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_table_is_printed_on_failure_only) {
  std::ostringstream log;
  LayerCheckOptions options;
  options.log = &log;
  manual_seed(1);
  Linear lin(3, 2);
  BOOST_TEST(check_layer(lin, linear_forward, {randn_leaf({2, 3}, 3)}, options).ok);
  BOOST_TEST(log.str().empty());
  const LayerCheckReport bad = check_buggy(Bug::wrong_backward, options);
  BOOST_TEST(log.str() == bad.table());
  BOOST_TEST(log.str().find("FAILED") != std::string::npos);
  // The gradient check's own lines sit under the failing row.
  BOOST_TEST(log.str().find("      input 0 'x' (2, 3) element") != std::string::npos, log.str());
}

BOOST_AUTO_TEST_CASE(module_inputs_and_generator_are_left_as_they_were) {
  manual_seed(5);
  Linear lin(3, 2);
  const std::vector<double> weight_before = lin.weight().value().to_vector();
  Variable w = lin.weight();
  w.set_grad(full({2, 3}, 0.25));
  lin.eval();
  Variable x = randn_leaf({4, 3}, 6, "x");
  x.set_grad(full({4, 3}, -1.0, DType::f64));
  default_generator().set_step(3);
  const GeneratorState rng = default_generator().state();

  BOOST_TEST(check_layer(lin, linear_forward, {x}, quiet()).ok);
  BOOST_TEST(lin.weight().dtype() == DType::f32);
  BOOST_TEST(lin.bias().dtype() == DType::f32);
  BOOST_TEST(lin.weight().value().to_vector() == weight_before);
  BOOST_TEST(lin.weight().grad().dtype() == DType::f32);
  BOOST_TEST(lin.weight().grad().to_vector() == std::vector<double>(6, 0.25));
  BOOST_TEST(!lin.bias().grad().defined());
  BOOST_TEST(!lin.is_training());
  BOOST_TEST(x.grad().to_vector() == std::vector<double>(12, -1.0));
  BOOST_TEST((default_generator().state() == rng));
}

BOOST_AUTO_TEST_CASE(f64_inputs_are_used_as_they_lie_and_f32_inputs_are_converted) {
  manual_seed(7);
  Linear lin(3, 4);
  // (3, 5) transposed: a non-contiguous (5, 3) leaf.
  const Variable xt(randn({3, 5}, 8).t(), true, "xt");
  BOOST_REQUIRE(!xt.value().is_contiguous());
  bool saw_strided = false;
  const auto strided = [&](Linear& m, const std::vector<Variable>& in) {
    saw_strided = saw_strided || !in[0].value().is_contiguous();
    return m(in[0]);
  };
  BOOST_TEST(check_layer(lin, strided, {xt}, quiet()).ok);
  BOOST_TEST(saw_strided);

  const Variable x32(normal({2, 3}, 0.0, 1.0, default_generator(), DType::f32), true, "x32");
  DType seen = DType::f32;
  const auto record = [&](Linear& m, const std::vector<Variable>& in) {
    seen = in[0].dtype();
    return m(in[0]);
  };
  const LayerCheckReport r = check_layer(lin, record, {x32}, quiet());
  BOOST_TEST(r.ok, r.table());
  BOOST_TEST(seen == DType::f64);
  BOOST_TEST(x32.dtype() == DType::f32);
  BOOST_TEST(!x32.grad().defined());
}

BOOST_AUTO_TEST_CASE(a_wrong_backward_fails_the_gradient_row) {
  const LayerCheckReport r = check_buggy(Bug::wrong_backward);
  expect_only_failure(r, "gradient (train)");
  BOOST_TEST(!row_of(r, "gradient (train)").report.empty());
  BOOST_TEST(r.max_abs_error > 0.1);
}

BOOST_AUTO_TEST_CASE(a_forward_that_resets_gradients_fails_backward_adds) {
  const LayerCheckReport r = check_buggy(Bug::zeroes_grads);
  expect_only_failure(r, "backward adds");
  BOOST_TEST(row_of(r, "backward adds").detail.find("param 'weight'") != std::string::npos, r.table());
}

BOOST_AUTO_TEST_CASE(an_unused_parameter_must_be_listed_as_unused) {
  const LayerCheckReport r = check_buggy(Bug::spare_parameter);
  BOOST_TEST(!r.ok);
  BOOST_TEST((status_of(r, "every leaf gets a gradient") == LayerCheckStatus::failed));
  BOOST_TEST(row_of(r, "every leaf gets a gradient").detail.find("'spare'") != std::string::npos, r.table());

  LayerCheckOptions listed = quiet();
  listed.unused = {"spare"};
  const LayerCheckReport ok = check_buggy(Bug::spare_parameter, listed);
  BOOST_TEST(ok.ok, ok.table());
  BOOST_TEST(row_of(ok, "every leaf gets a gradient").detail.find("1 parameter listed as unused") != std::string::npos);

  // Listing a parameter that does get a gradient is a stale list.
  LayerCheckOptions stale = quiet();
  stale.unused = {"spare", "weight"};
  const LayerCheckReport s = check_buggy(Bug::spare_parameter, stale);
  BOOST_TEST((status_of(s, "every leaf gets a gradient") == LayerCheckStatus::failed));
  BOOST_TEST(row_of(s, "every leaf gets a gradient").detail.find("listed as unused but got a gradient") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(state_outside_the_state_dict_fails_the_round_trip_into_a_twin) {
  const LayerCheckReport r = check_buggy(Bug::hidden_state);
  expect_only_failure(r, "state_dict round trip");
}

BOOST_AUTO_TEST_CASE(a_mode_dependent_branch_without_dropout_fails_train_eval) {
  const LayerCheckReport r = check_buggy(Bug::mode_branch);
  expect_only_failure(r, "train/eval");
}

BOOST_AUTO_TEST_CASE(dropout_that_ignores_eval_fails_train_eval) {
  LayerCheckOptions options = quiet();
  options.dropout = true;
  const LayerCheckReport r = check_buggy(Bug::always_drops, options);
  BOOST_TEST((status_of(r, "train/eval") == LayerCheckStatus::failed), r.table());
  BOOST_TEST(row_of(r, "train/eval").detail.find("depends on the random generator") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(randomness_outside_the_default_generator_fails_same_seed) {
  const LayerCheckReport r = check_buggy(Bug::own_noise);
  BOOST_TEST((status_of(r, "same seed") == LayerCheckStatus::failed), r.table());
  BOOST_TEST(row_of(r, "same seed").detail.find("two train passes from one generator state differ") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_init_that_ignores_the_seed_fails_same_seed) {
  manual_seed(3);
  Linear lin(3, 2);
  int built = 0;
  LayerCheckOptions options = quiet();
  // Each twin draws from a generator of its own, seeded by a counter rather than by manual_seed.
  options.make_twin = [&built] {
    Generator own(static_cast<uint64_t>(++built));
    auto m = std::make_unique<Linear>(3, 2);
    m->load_state_dict({{"weight", uniform({2, 3}, -1.0, 1.0, own)}, {"bias", uniform({2}, -1.0, 1.0, own)}});
    return m;
  };
  const LayerCheckReport r = check_layer(lin, linear_forward, {randn_leaf({2, 3}, 4)}, options);
  expect_only_failure(r, "same seed");
  BOOST_TEST(row_of(r, "same seed").detail.find("two twins built after one manual_seed differ in 'weight'") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(dropout_is_detected_and_both_modes_are_gradient_checked) {
  manual_seed(9);
  Sequential net(std::make_unique<Linear>(4, 6), std::make_unique<Dropout>(0.5), std::make_unique<Linear>(6, 2));
  LayerCheckOptions options = quiet();
  options.make_twin = [] {
    return std::make_unique<Sequential>(std::make_unique<Linear>(4, 6), std::make_unique<Dropout>(0.5),
                                        std::make_unique<Linear>(6, 2));
  };
  const auto fwd = [](Sequential& m, const std::vector<Variable>& in) { return m(in[0]); };
  const LayerCheckReport r = check_layer(net, fwd, {randn_leaf({3, 4}, 10, "x")}, options);
  BOOST_TEST(r.ok, r.table());
  BOOST_TEST(r.passed() == 8);
  BOOST_TEST(row_of(r, "train/eval").detail.find("dropout: train differs from eval") != std::string::npos);
  BOOST_TEST(row_of(r, "same seed").detail.find("another state, another mask") != std::string::npos);

  // Said to drop but it does not: no generator state makes train differ from eval.
  manual_seed(9);
  Linear plain(4, 2);
  LayerCheckOptions claimed = quiet();
  claimed.dropout = true;
  const LayerCheckReport c = check_layer(plain, linear_forward, {randn_leaf({3, 4}, 10)}, claimed);
  BOOST_TEST((status_of(c, "train/eval") == LayerCheckStatus::failed), c.table());
  BOOST_TEST((status_of(c, "same seed") == LayerCheckStatus::failed), c.table());
}

BOOST_AUTO_TEST_CASE(a_layer_calling_dropout_itself_is_random_when_it_says_so) {
  const LayerCheckReport r = check_own_dropout<DeclaredOwnDropout>(0.5);
  BOOST_TEST(r.ok, r.table());
  BOOST_TEST((status_of(r, "gradient (eval)") == LayerCheckStatus::passed), r.table());
  BOOST_TEST(row_of(r, "train/eval").detail.find("dropout: train differs from eval") != std::string::npos, r.table());
  BOOST_TEST(row_of(r, "same seed").detail.find("another state, another mask") != std::string::npos, r.table());

  // Asked of every module in the tree, not only of the root.
  manual_seed(25);
  Sequential net(std::make_unique<Linear>(3, 3), std::make_unique<DeclaredOwnDropout>(0.5));
  const auto fwd = [](Sequential& m, const std::vector<Variable>& in) { return m(in[0]); };
  const LayerCheckReport nested = check_layer(net, fwd, {randn_leaf({4, 3}, 26, "x")}, quiet());
  BOOST_TEST(nested.ok, nested.table());
  BOOST_TEST((status_of(nested, "gradient (eval)") == LayerCheckStatus::passed), nested.table());

  // A rate of zero draws nothing: the layer says so, and eval is not checked apart.
  const LayerCheckReport off = check_own_dropout<DeclaredOwnDropout>(0.0);
  BOOST_TEST(off.ok, off.table());
  BOOST_TEST((status_of(off, "gradient (eval)") == LayerCheckStatus::skipped), off.table());
}

BOOST_AUTO_TEST_CASE(a_layer_calling_dropout_without_saying_so_fails_train_eval) {
  const LayerCheckReport r = check_own_dropout<OwnDropout>(0.5);
  expect_only_failure(r, "train/eval");
  BOOST_TEST((status_of(r, "gradient (eval)") == LayerCheckStatus::skipped), r.table());
  BOOST_TEST(row_of(r, "train/eval").detail.find("override draws_random_numbers_in_training()") != std::string::npos,
             r.table());
  LayerCheckOptions told = quiet();  // the explicit option still decides when given
  told.dropout = true;
  BOOST_TEST(check_own_dropout<OwnDropout>(0.5, told).ok);
}

BOOST_AUTO_TEST_CASE(an_unregistered_trainable_leaf_fails_the_registration_row) {
  const LayerCheckReport r = check_buggy(Bug::unregistered_scale);
  expect_only_failure(r, "every trainable leaf is registered");
  const std::string detail = row_of(r, "every trainable leaf is registered").detail;
  BOOST_TEST(detail.find("trainable leaf 'scale' (3,) f64, consumed by '") != std::string::npos, r.table());
  BOOST_TEST(detail.find("register it with register_parameter") != std::string::npos, r.table());
  // The other rows see nothing wrong: the leaf is simply invisible to them.
  BOOST_TEST(r.passed() == 6, r.table());

  // A forward that fails for another reason than an unregistered leaf passes its exception on.
  manual_seed(27);
  Linear lin(4, 2);
  AG_CHECK_THROWS_WITH(check_layer(lin, linear_forward, {randn_leaf({2, 3}, 28, "x")}, quiet()),
                       std::invalid_argument, "Linear: input of shape (2, 3)");
  BOOST_TEST(lin.weight().dtype() == DType::f32);
}

BOOST_AUTO_TEST_CASE(zero_ok_names_match_dotted_suffixes) {
  manual_seed(12);
  MultiHeadAttention mha(MultiHeadAttentionOptions{.d_model = 4, .n_head = 2});
  const auto fwd = [](MultiHeadAttention& m, const std::vector<Variable>& in) { return m.forward(in[0]).output; };
  const Variable x = randn_leaf({1, 3, 4}, 13, "x");
  // The key bias gets an identically zero gradient: without zero_ok that fails the check.
  const LayerCheckReport strict = check_layer(mha, fwd, {x}, quiet());
  BOOST_TEST((status_of(strict, "gradient (train)") == LayerCheckStatus::failed), strict.table());
  BOOST_TEST(row_of(strict, "gradient (train)").report.find("w_k.bias") != std::string::npos);
  LayerCheckOptions options = quiet();
  options.zero_ok = {"w_k.bias"};
  const LayerCheckReport r = check_layer(mha, fwd, {x}, options);
  BOOST_TEST(r.ok, r.table());
}

BOOST_AUTO_TEST_CASE(unusable_arguments_throw_naming_the_problem) {
  manual_seed(14);
  Linear lin(3, 2);
  const Variable x = randn_leaf({2, 3}, 15, "x");
  LayerCheckOptions typo = quiet();
  typo.zero_ok = {"wieght"};
  AG_CHECK_THROWS_WITH(check_layer(lin, linear_forward, {x}, typo), std::invalid_argument, "check_layer (Linear)",
                       "'wieght'", "weight, bias");
  ReLU relu;
  const auto relu_fwd = [](ReLU& m, const std::vector<Variable>& in) { return m(in[0]); };
  AG_CHECK_THROWS_WITH(check_layer(relu, relu_fwd, {Variable(randn({2}, 1))}, quiet()), std::invalid_argument,
                       "check_layer (ReLU)", "nothing to check");
  AG_CHECK_THROWS_WITH(check_layer(lin, linear_forward, {x * 2.0}, quiet()), std::invalid_argument, "input 0",
                       "(2, 3)", "mul_scalar");
  LayerCheckOptions null_twin = quiet();
  null_twin.make_twin = [] { return std::unique_ptr<Module>(); };
  AG_CHECK_THROWS_WITH(check_layer(lin, linear_forward, {x}, null_twin), std::logic_error, "null module");
  LayerCheckOptions wrong_twin = quiet();
  wrong_twin.make_twin = [] { return std::make_unique<ReLU>(); };
  AG_CHECK_THROWS_WITH(check_layer(lin, linear_forward, {x}, wrong_twin), std::logic_error, "built a ReLU");
  // Whatever threw, the module is back in f32.
  BOOST_TEST(lin.weight().dtype() == DType::f32);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
