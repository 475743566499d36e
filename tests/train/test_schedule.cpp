// Learning-rate schedules against hand-computed values, and gradient clipping.
#include <cmath>
#include <numbers>

#include "attograd/train/schedule.h"
#include "support.h"

namespace ag::testing {

BOOST_AUTO_TEST_SUITE(lr_schedule)

BOOST_AUTO_TEST_CASE(constant_without_and_with_warmup) {
  const LrSchedule flat({.lr = 0.1});
  BOOST_TEST(flat.at(0) == 0.1);
  BOOST_TEST(flat.at(12345) == 0.1);
  // Warm-up over 4 updates: 0.1 * (s + 1) / 4.
  const LrSchedule warm({.lr = 0.1, .warmup_steps = 4});
  BOOST_TEST(warm.at(0) == 0.025);
  BOOST_TEST(warm.at(1) == 0.05);
  BOOST_TEST(warm.at(2) == 0.075, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(warm.at(3) == 0.1);
  BOOST_TEST(warm.at(4) == 0.1);
  BOOST_TEST(warm.at(100) == 0.1);
}

BOOST_AUTO_TEST_CASE(warmup_then_cosine_decay) {
  // lr 1, min 0.1, 2 warm-up updates, decay over updates 2..10.
  const LrSchedule s({.lr = 1.0, .min_lr = 0.1, .warmup_steps = 2, .total_steps = 10, .decay = LrDecay::cosine});
  const auto tol = boost::test_tools::tolerance(1e-12);
  BOOST_TEST(s.at(0) == 0.5, tol);
  BOOST_TEST(s.at(1) == 1.0, tol);
  BOOST_TEST(s.at(2) == 1.0, tol);                                // progress 0
  BOOST_TEST(s.at(4) == 0.1 + 0.45 * (1 + std::sqrt(0.5)), tol);  // progress 1/4: cos(pi/4)
  BOOST_TEST(s.at(6) == 0.55, tol);                               // progress 1/2: halfway
  BOOST_TEST(s.at(8) == 0.1 + 0.45 * (1 - std::sqrt(0.5)), tol);  // progress 3/4
  BOOST_TEST(s.at(10) == 0.1, tol);                               // the end: min_lr
  BOOST_TEST(s.at(1000) == 0.1, tol);                             // and held after it
  for (int64_t step = 2; step < 10; ++step) BOOST_TEST(s.at(step + 1) < s.at(step));  // monotone decay
}

BOOST_AUTO_TEST_CASE(linear_decay_to_min_lr) {
  const LrSchedule s({.lr = 1.0, .min_lr = 0.1, .total_steps = 10, .decay = LrDecay::linear});
  const auto tol = boost::test_tools::tolerance(1e-12);
  BOOST_TEST(s.at(0) == 1.0, tol);
  BOOST_TEST(s.at(1) == 0.91, tol);
  BOOST_TEST(s.at(5) == 0.55, tol);
  BOOST_TEST(s.at(9) == 0.19, tol);
  BOOST_TEST(s.at(10) == 0.1, tol);
  BOOST_TEST(s.at(11) == 0.1, tol);
  // With warm-up the linear ramp up meets the linear ramp down at the peak.
  const LrSchedule w({.lr = 0.02, .warmup_steps = 10, .total_steps = 20, .decay = LrDecay::linear});
  BOOST_TEST(w.at(4) == 0.01, tol);
  BOOST_TEST(w.at(10) == 0.02, tol);
  BOOST_TEST(w.at(15) == 0.01, tol);
  BOOST_TEST(w.at(20) == 0.0, tol);
}

BOOST_AUTO_TEST_CASE(invalid_options_are_named) {
  AG_CHECK_THROWS_WITH(LrSchedule({.lr = -1.0}), std::invalid_argument, "LrSchedule", "lr");
  AG_CHECK_THROWS_WITH(LrSchedule({.lr = 0.1, .min_lr = 0.2}), std::invalid_argument, "min_lr");
  AG_CHECK_THROWS_WITH(LrSchedule({.lr = 0.1, .warmup_steps = -1}), std::invalid_argument, "warmup_steps", "-1");
  AG_CHECK_THROWS_WITH(LrSchedule({.lr = 0.1, .warmup_steps = 10, .total_steps = 10, .decay = LrDecay::cosine}),
                       std::invalid_argument, "cosine", "total_steps > warmup_steps");
  AG_CHECK_THROWS_WITH(LrSchedule({.lr = 0.1, .decay = LrDecay::linear}), std::invalid_argument, "linear");
  AG_CHECK_THROWS_WITH(LrSchedule({.lr = 0.1}).at(-1), std::invalid_argument, "step", "-1");
}

BOOST_AUTO_TEST_CASE(decay_names_round_trip) {
  for (LrDecay d : {LrDecay::constant, LrDecay::cosine, LrDecay::linear}) BOOST_TEST((parse_lr_decay(lr_decay_name(d)) == d));
  AG_CHECK_THROWS_WITH(parse_lr_decay("step"), std::invalid_argument, "'step'", "constant, cosine or linear");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(gradient_clipping)

namespace {
Variable leaf_with_grad(const std::vector<double>& grad, DType dtype = DType::f64) {
  Variable v(zeros({static_cast<int64_t>(grad.size())}, dtype), true);
  v.set_grad(from_vector(grad, {static_cast<int64_t>(grad.size())}, dtype));
  return v;
}
}  // namespace

BOOST_AUTO_TEST_CASE(scales_all_grads_by_one_factor_and_returns_the_norm) {
  // Norm over both tensors: sqrt(3^2 + 4^2 + 12^2) = 13.
  Variable a = leaf_with_grad({3, 4}), b = leaf_with_grad({12});
  Variable no_grad(zeros({5}, DType::f64), true);
  const NamedVariables params = {{"a", a}, {"none", no_grad}, {"b", b}};
  const double norm = clip_grad_norm(params, 6.5);
  BOOST_TEST(norm == 13.0);
  const double coef = 6.5 / (13.0 + 1e-6);  // PyTorch's factor
  BOOST_TEST(a.grad().to_vector() == (std::vector<double>{3 * coef, 4 * coef}));
  BOOST_TEST(b.grad().to_vector() == (std::vector<double>{12 * coef}));
  BOOST_TEST(!no_grad.grad().defined());
  BOOST_TEST(grad_norm(params) == 6.5, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(leaves_small_grads_alone) {
  Variable a = leaf_with_grad({3, 4});
  const double norm = clip_grad_norm({{"a", a}}, 5.0 + 1e-3);
  BOOST_TEST(norm == 5.0);
  BOOST_TEST(a.grad().to_vector() == (std::vector<double>{3, 4}));
}

BOOST_AUTO_TEST_CASE(float32_and_non_contiguous_grads_are_scaled_in_place) {
  Variable a(zeros({2, 3}, DType::f32), true);
  Tensor base = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}, DType::f32);
  a.set_grad(base.t());  // a transposed view: scaled through its strides, in its storage
  Variable b = leaf_with_grad({2, 1}, DType::f32);
  const double norm = clip_grad_norm({{"a", a}, {"b", b}}, 1.0);
  BOOST_TEST(norm == std::sqrt(91.0 + 5.0), boost::test_tools::tolerance(1e-6));
  const double coef = 1.0 / (norm + 1e-6);
  BOOST_TEST(base.at({2, 1}) == 6 * coef, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(a.grad().at({1, 2}) == 6 * coef, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(b.grad().at({0}) == 2 * coef, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(grad_norm({{"a", a}, {"b", b}}) == 1.0, boost::test_tools::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(non_finite_norm) {
  Variable a = leaf_with_grad({1, INFINITY});
  AG_CHECK_THROWS_WITH(clip_grad_norm({{"a", a}}, 1.0, true), std::runtime_error, "clip_grad_norm", "inf");
  // Without the check the factor is 0 and Inf * 0 is NaN, as in PyTorch: the caller sees it.
  Variable b = leaf_with_grad({1, INFINITY});
  BOOST_TEST(std::isinf(clip_grad_norm({{"b", b}}, 1.0)));
  BOOST_TEST(b.grad().at({0}) == 0.0);
  BOOST_TEST(std::isnan(b.grad().at({1})));
}

BOOST_AUTO_TEST_CASE(invalid_max_norm) {
  Variable a = leaf_with_grad({1});
  AG_CHECK_THROWS_WITH(clip_grad_norm({{"a", a}}, 0.0), std::invalid_argument, "clip_grad_norm", "max_norm");
  AG_CHECK_THROWS_WITH(clip_grad_norm({{"a", a}}, -1.0), std::invalid_argument, "max_norm");
  AG_CHECK_THROWS_WITH(clip_grad_norm({{"a", a}}, NAN), std::invalid_argument, "max_norm");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
