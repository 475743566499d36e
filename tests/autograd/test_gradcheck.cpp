// gradcheck itself: it passes correct ops in both modes, and it fails (with a report that says
// where) for a wrong backward, a backward that assigns instead of adding, and a gradient that
// is identically zero; it rejects unusable arguments and replays random ops exactly.
#include <algorithm>

#include "support.h"

namespace ag::testing {
namespace {

Variable leaf(const std::vector<double>& v, const Shape& shape, const std::string& name) {
  return Variable(from_vector(v, shape, DType::f64), true, name);
}

// x -> x^2 whose backward forgets the factor 2 (returns g * x).
Variable wrong_square(const Variable& x) {
  const Tensor xv = x.value();
  return make_result("wrong_square", kernels::mul(xv, xv), {x},
                     [xv](const Tensor& g, GradSink& grads) { grads.add(0, kernels::mul(g, xv)); });
}

// x -> 2x whose backward writes the leaf's gradient directly, overwriting whatever was there,
// instead of handing it to the sink (which adds).
Variable assigning_double(const Variable& x) {
  Variable target = x;
  return make_result("assigning_double", kernels::affine(x.value(), 2.0, 0.0), {x},
                     [target](const Tensor& g, GradSink&) mutable {
                       target.mutable_grad() = kernels::affine(g, 2.0, 0.0);
                     });
}

// Inverted dropout with p = 0.5 drawn from the default generator, written from outside the
// library: every call draws a fresh mask.
Variable random_mask(const Variable& x) {
  std::vector<double> mask = uniform(x.shape(), 0.0, 1.0, default_generator(), DType::f64).to_vector();
  for (double& m : mask) m = m < 0.5 ? 0.0 : 2.0;
  return mul(x, Variable(from_vector(mask, x.shape(), DType::f64), false));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gradcheck_itself)

BOOST_AUTO_TEST_CASE(passes_correct_ops_comparing_the_full_jacobian) {
  const Variable x = leaf({0.1, -0.4, 0.7, 1.2, -1.1, 0.3}, {2, 3}, "x");
  const Variable w = leaf({0.5, -0.2, 0.9, 0.4, -0.6, 0.8, 0.1, -0.3, 0.2, 0.7, -0.5, 0.6}, {3, 4}, "w");
  const auto fn = [](const std::vector<Variable>& in) { return tanh(matmul(in[0], in[1])); };
  const GradcheckResult r = gradcheck(fn, {x, w});
  BOOST_TEST(r.ok, r.report);
  BOOST_TEST(static_cast<bool>(r));
  BOOST_TEST(r.report.empty());
  BOOST_TEST(r.full_jacobian);
  BOOST_TEST(r.comparisons == (6 + 12) * 8);  // every input element against every output element
  BOOST_TEST(r.max_abs_error < 1e-8);
}

BOOST_AUTO_TEST_CASE(passes_correct_ops_comparing_projections) {
  const Variable x = leaf({0.1, -0.4, 0.7, 1.2, -1.1, 0.3}, {2, 3}, "x");
  const Variable w = leaf({0.5, -0.2, 0.9, 0.4, -0.6, 0.8, 0.1, -0.3, 0.2, 0.7, -0.5, 0.6}, {3, 4}, "w");
  GradcheckOptions options;
  options.max_full_inputs = 4;
  options.projections = 5;
  const GradcheckResult r = gradcheck([](const std::vector<Variable>& in) { return tanh(matmul(in[0], in[1])); },
                                      {x, w}, options);
  BOOST_TEST(r.ok, r.report);
  BOOST_TEST(!r.full_jacobian);
  BOOST_TEST(r.comparisons == 5 * 2);  // one directional derivative per leaf per projection
}

BOOST_AUTO_TEST_CASE(fails_a_wrong_backward_and_says_where) {
  const Variable x = leaf({1.5, -2.0, 0.5, 3.0}, {2, 2}, "x");
  const GradcheckResult r = gradcheck([](const std::vector<Variable>& in) { return wrong_square(in[0]); }, {x});
  BOOST_TEST(!r.ok);
  BOOST_TEST(!static_cast<bool>(r));
  BOOST_TEST(r.full_jacobian);
  // d(x^2)/dx at 1.5 is 3; the broken backward says 1.5.
  for (const std::string part : {"input 0 'x' (2, 2)", "element (0, 0)", "output (0, 0)", "numeric 3 ", "analytic 1.5",
                                 "atol 1e-05", "rtol 0.001"}) {
    BOOST_TEST(r.report.find(part) != std::string::npos, "report lacks '" << part << "':\n" << r.report);
  }
  BOOST_TEST(r.report.find("element (1, 1) output (1, 1): numeric 6 analytic 3") != std::string::npos, r.report);
  BOOST_TEST(r.max_abs_error >= 3.0 - 1e-6);
  // Off-diagonal Jacobian entries are right (both 0): only the four diagonal ones are reported.
  BOOST_TEST(std::count(r.report.begin(), r.report.end(), '\n') == 4);
}

BOOST_AUTO_TEST_CASE(fails_a_wrong_backward_in_projection_mode) {
  Generator gen(3);
  const Variable x(uniform({40, 60}, 0.5, 1.5, gen, DType::f64), true, "big");
  const GradcheckResult r = gradcheck([](const std::vector<Variable>& in) { return wrong_square(in[0]); }, {x});
  BOOST_TEST(!r.full_jacobian);
  BOOST_TEST(!r.ok);
  BOOST_TEST(r.report.find("input 0 'big' (40, 60) projection 0: numeric") != std::string::npos, r.report);
}

BOOST_AUTO_TEST_CASE(checks_parameters_the_function_closes_over) {
  const Variable x = leaf({0.3, -0.7}, {2}, "x");
  const Variable w = leaf({1.5, 2.5}, {2}, "w");
  GradcheckOptions options;
  options.params = {w};
  // Correct in x, wrong in the parameter w.
  const auto fn = [&](const std::vector<Variable>& in) { return add(mul(in[0], 2.0), wrong_square(w)); };
  const GradcheckResult r = gradcheck(fn, {x}, options);
  BOOST_TEST(!r.ok);
  BOOST_TEST(r.report.find("param 0 'w' (2,) element (0,)") != std::string::npos, r.report);
  BOOST_TEST(r.report.find("input 0") == std::string::npos, r.report);
  // Without listing the parameter the wrong backward goes unseen: that is what params is for.
  BOOST_TEST(gradcheck(fn, {x}).ok);
  // A correct function of both passes.
  const auto good = [&](const std::vector<Variable>& in) { return mul(in[0], exp(w)); };
  check_gradients(good, {x}, options);
}

BOOST_AUTO_TEST_CASE(fails_a_backward_that_assigns_instead_of_adding) {
  const Variable x = leaf({0.5, -1.0, 2.0}, {3}, "x");
  const auto fn = [](const std::vector<Variable>& in) { return assigning_double(in[0]); };
  const GradcheckResult r = gradcheck(fn, {x});
  BOOST_TEST(!r.ok);
  BOOST_TEST(r.report.find("input 0 'x' (3,) element (0,): backward did not add to the existing gradient") !=
                 std::string::npos,
             r.report);
  // Its Jacobian alone is right (each backward starts from an empty gradient), so the
  // accumulation check is what catches it.
  GradcheckOptions no_accumulation;
  no_accumulation.check_accumulation = false;
  BOOST_TEST(gradcheck(fn, {x}, no_accumulation).ok);
  // The same op written with the sink passes both.
  check_gradients([](const std::vector<Variable>& in) { return mul(in[0], 2.0); }, {x});
}

BOOST_AUTO_TEST_CASE(fails_when_both_gradients_are_identically_zero) {
  const Variable x = leaf({0.5, -1.0}, {2}, "x");
  const Variable y = leaf({2.0, 3.0}, {2}, "y");
  const auto fn = [](const std::vector<Variable>& in) { return add(mul(in[0], 0.0), exp(in[1])); };
  const GradcheckResult r = gradcheck(fn, {x, y});
  BOOST_TEST(!r.ok);
  BOOST_TEST(r.report.find("input 0 'x' (2,): the gradient is identically zero") != std::string::npos, r.report);
  BOOST_TEST(r.report.find("input 1") == std::string::npos, r.report);
  GradcheckOptions options;
  options.zero_ok = {x};
  check_gradients(fn, {x, y}, options);
  // An input the function never reads at all, in projection mode too.
  options.zero_ok.clear();
  options.max_full_inputs = 1;
  const GradcheckResult unused =
      gradcheck([](const std::vector<Variable>& in) { return exp(in[1]); }, {x, y}, options);
  BOOST_TEST(!unused.ok);
  BOOST_TEST(unused.report.find("input 0 'x' (2,): the gradient is identically zero") != std::string::npos,
             unused.report);
}

BOOST_AUTO_TEST_CASE(rejects_unusable_arguments) {
  const auto id = [](const std::vector<Variable>& in) { return mul(in[0], 1.0); };
  const Variable f32(ones({2, 3}, DType::f32), true, "x32");
  AG_CHECK_THROWS_WITH(gradcheck(id, {f32}), std::invalid_argument, "gradcheck", "input 0 'x32' (2, 3)", "f32", "f64");
  const Variable x = leaf({1, 2}, {2}, "x");
  const auto to_f32 = [](const std::vector<Variable>& in) {
    return make_result("to_f32", in[0].value().to(DType::f32), {in[0]}, [](const Tensor&, GradSink&) {});
  };
  AG_CHECK_THROWS_WITH(gradcheck(to_f32, {x}), std::invalid_argument, "gradcheck", "output", "f32");
  AG_CHECK_THROWS_WITH(gradcheck(id, {mul(x, 2.0)}), std::invalid_argument, "gradcheck", "input 0", "not a leaf");
  const Variable expanded(from_vector(std::vector<double>{1, 2}, {2}, DType::f64).expand({3, 2}), true, "e");
  AG_CHECK_THROWS_WITH(gradcheck(id, {expanded}), std::invalid_argument, "gradcheck", "'e' (3, 2)", "overlapping");
  const Variable constant(ones({2}, DType::f64), false);
  AG_CHECK_THROWS_WITH(gradcheck(id, {constant}), std::invalid_argument, "gradcheck", "no input");
  GradcheckOptions options;
  options.params = {Variable(ones({2}, DType::f64), false, "frozen")};
  AG_CHECK_THROWS_WITH(gradcheck(id, {x}, options), std::invalid_argument, "param 0 'frozen'", "does not require grad");
}

BOOST_AUTO_TEST_CASE(random_ops_see_the_same_generator_state_at_every_evaluation) {
  GeneratorStateGuard keep;
  manual_seed(5);
  Generator gen(8);
  const Variable x(normal({4, 5}, 0.0, 1.0, gen, DType::f64), true, "x");
  const auto fn = [](const std::vector<Variable>& in) { return random_mask(in[0]); };
  // The function really is random: two calls draw two different masks...
  const std::vector<double> first = fn({x}).value().to_vector();
  const std::vector<double> second = fn({x}).value().to_vector();
  BOOST_TEST(first != second);
  int kept = 0;
  for (size_t i = 0; i < first.size(); ++i) kept += first[i] != 0;
  BOOST_TEST((kept > 0 && kept < 20));
  // ...yet gradcheck compares like with like, and leaves the generator where it found it.
  const GeneratorState before = default_generator().state();
  check_gradients(fn, {x});
  GradcheckOptions projection;
  projection.max_full_inputs = 1;
  check_gradients(fn, {x}, projection);
  BOOST_TEST((default_generator().state() == before));
}

BOOST_AUTO_TEST_CASE(leaves_the_callers_gradients_and_values_alone) {
  Variable x = leaf({0.2, 0.4}, {2}, "x");
  x.set_grad(from_vector(std::vector<double>{7, 8}, {2}, DType::f64));
  const Variable y = leaf({1.0, 2.0}, {2}, "y");  // no gradient yet
  check_gradients([](const std::vector<Variable>& in) { return mul(exp(in[0]), in[1]); }, {x, y});
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{7, 8}));
  BOOST_TEST(!y.grad().defined());
  BOOST_TEST(x.value().to_vector() == (std::vector<double>{0.2, 0.4}));  // perturbations undone exactly
}

BOOST_AUTO_TEST_CASE(report_is_capped) {
  Generator gen(4);
  const Variable x(uniform({6, 6}, 0.5, 1.5, gen, DType::f64), true, "x");
  const GradcheckResult r = gradcheck([](const std::vector<Variable>& in) { return wrong_square(in[0]); }, {x});
  BOOST_TEST(!r.ok);
  BOOST_TEST(std::count(r.report.begin(), r.report.end(), '\n') == 20);  // 36 failures, 20 lines
}

BOOST_AUTO_TEST_CASE(inputs_that_do_not_require_grad_are_constants) {
  const Variable x = leaf({0.5, 1.5}, {2}, "x");
  const Variable c(from_vector(std::vector<double>{3, 4}, {2}, DType::f64), false, "c");
  const GradcheckResult r = gradcheck([](const std::vector<Variable>& in) { return mul(in[0], in[1]); }, {x, c});
  BOOST_TEST(r.ok, r.report);
  BOOST_TEST(r.comparisons == 2 * 2);  // only x's two elements against two outputs
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
