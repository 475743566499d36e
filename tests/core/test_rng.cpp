// The counter-based generator: reproducible bits from (seed, step, call, index), distinct
// streams otherwise, and uniform/normal samples with roughly the right moments.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <cmath>
#include <set>

#include "attograd/core/parallel.h"
#include "attograd/core/skip_init.h"
#include "attograd/core/threads.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector(); }

double sample_mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double sample_var(const std::vector<double>& v) {
  const double m = sample_mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

const std::vector<DType> kDTypes = {DType::f32, DType::f64};

}  // namespace

BOOST_AUTO_TEST_SUITE(rng)

BOOST_AUTO_TEST_CASE(same_seed_gives_the_same_bits) {
  Generator g1(42), g2(42);
  BOOST_TEST(values(uniform({1000}, 0.0, 1.0, g1, DType::f64)) == values(uniform({1000}, 0.0, 1.0, g2, DType::f64)));
  BOOST_TEST(values(normal({64}, 0.0, 1.0, g1, DType::f32)) == values(normal({64}, 0.0, 1.0, g2, DType::f32)));
  BOOST_TEST((g1.state() == g2.state()));
  // manual_seed rewinds to the start.
  Generator g3(7);
  const std::vector<double> first = values(uniform({16}, 0.0, 1.0, g3, DType::f64));
  g3.manual_seed(7);
  BOOST_TEST(values(uniform({16}, 0.0, 1.0, g3, DType::f64)) == first);
}

BOOST_AUTO_TEST_CASE(different_seed_step_or_call_gives_different_bits) {
  Generator a(1), b(2);
  const uint64_t ka = a.next_stream();
  BOOST_TEST(ka != b.next_stream());                   // seed
  const uint64_t ka2 = a.next_stream();
  BOOST_TEST(ka2 != ka);                               // call
  BOOST_TEST(a.state().call == 2u);
  a.set_step(5);
  BOOST_TEST(a.state().call == 0u);                    // a new step restarts the call counter
  const uint64_t k_step5 = a.next_stream();
  BOOST_TEST(k_step5 != ka);                           // step
  a.set_step(5);
  BOOST_TEST(a.next_stream() == k_step5);              // replaying a step replays its streams
  a.set_step(0);
  BOOST_TEST(a.next_stream() == ka);
  // Within a stream, every index gets its own bits.
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 1000; ++i) seen.insert(Generator::bits(ka, i));
  BOOST_TEST(seen.size() == 1000u);
  BOOST_TEST(Generator::bits(ka, 3) == Generator::bits(ka, 3));
}

BOOST_AUTO_TEST_CASE(two_tensors_from_one_generator_differ) {
  Generator g(3);
  const std::vector<double> x = values(uniform({100}, 0.0, 1.0, g, DType::f64));
  const std::vector<double> y = values(uniform({100}, 0.0, 1.0, g, DType::f64));
  int equal = 0;
  for (size_t i = 0; i < x.size(); ++i) equal += x[i] == y[i];
  BOOST_TEST(equal == 0);
}

BOOST_AUTO_TEST_CASE(saved_state_reproduces_the_same_draws) {
  Generator g(11);
  g.set_step(3);
  (void)g.next_stream();
  const GeneratorState saved = g.state();
  const std::vector<double> x = values(normal({32}, 1.0, 2.0, g, DType::f64));
  g.set_state(saved);
  BOOST_TEST(values(normal({32}, 1.0, 2.0, g, DType::f64)) == x);
}

BOOST_AUTO_TEST_CASE(state_guard_restores_the_default_generator) {
  const GeneratorState before = default_generator().state();
  {
    GeneratorStateGuard guard;
    manual_seed(999);
    (void)uniform({4}, 0.0, 1.0);
    BOOST_TEST(default_generator().state().seed == 999u);
  }
  BOOST_TEST((default_generator().state() == before));
}

// Under a SkipInitGuard the factories give zeros of the asked shape and dtype and claim no
// stream; the guards nest, and after the last one the draws are the ones an unguarded run makes.
BOOST_AUTO_TEST_CASE(skip_init_draws_nothing_and_gives_zeros) {
  Generator g(17), plain(17);
  {
    SkipInitGuard outer;
    {
      SkipInitGuard inner;
      const Tensor u = uniform({3, 4}, -1.0, 1.0, g, DType::f64);
      BOOST_TEST(u.shape() == Shape({3, 4}));
      BOOST_TEST((u.dtype() == DType::f64));
      BOOST_TEST(values(u) == std::vector<double>(12, 0.0));
    }
    BOOST_TEST(init_skipped());
    BOOST_TEST(values(normal({5}, 1.0, 2.0, g)) == std::vector<double>(5, 0.0));
    BOOST_TEST((g.state() == plain.state()));
  }
  BOOST_TEST(!init_skipped());
  BOOST_TEST(values(normal({8}, 1.0, 2.0, g, DType::f64)) == values(normal({8}, 1.0, 2.0, plain, DType::f64)));
  BOOST_TEST(values(normal({8}, 1.0, 2.0, plain, DType::f64)) != std::vector<double>(8, 0.0));
}

BOOST_AUTO_TEST_CASE(the_value_of_an_element_does_not_depend_on_the_tensor_size) {
  // Element i is bits(key, i): a bigger draw from the same state starts with the smaller one.
  Generator g1(5), g2(5);
  const std::vector<double> small = values(uniform({10}, 0.0, 1.0, g1, DType::f64));
  const std::vector<double> big = values(uniform({1000}, 0.0, 1.0, g2, DType::f64));
  BOOST_TEST(std::vector<double>(big.begin(), big.begin() + 10) == small);
}

BOOST_DATA_TEST_CASE(uniform_is_in_range_with_the_right_moments, bdata::make(kDTypes), dtype) {
  Generator g(2024);
  const double low = -1.0, high = 3.0;
  const std::vector<double> v = values(uniform({20000}, low, high, g, dtype));
  for (double x : v) BOOST_TEST_REQUIRE((x >= low && x < high), x);
  // Mean 1, variance (4^2)/12 = 4/3; the bounds are ~6 standard errors wide.
  BOOST_TEST(std::abs(sample_mean(v) - 1.0) < 0.05);
  BOOST_TEST(std::abs(sample_var(v) - 4.0 / 3.0) < 0.06);
  // Every tenth of the range gets roughly a tenth of the samples.
  std::vector<int> bins(10, 0);
  for (double x : v) ++bins[static_cast<size_t>((x - low) / (high - low) * 10)];
  for (int b : bins) BOOST_TEST(std::abs(b - 2000) < 250, b);
}

BOOST_DATA_TEST_CASE(normal_has_the_right_moments, bdata::make(kDTypes), dtype) {
  Generator g(77);
  const std::vector<double> v = values(normal({20000}, 2.0, 0.5, g, dtype));
  BOOST_TEST(std::abs(sample_mean(v) - 2.0) < 0.015);
  BOOST_TEST(std::abs(std::sqrt(sample_var(v)) - 0.5) < 0.015);
  // About 68% within one standard deviation, 95% within two.
  int one = 0, two = 0;
  for (double x : v) {
    one += std::abs(x - 2.0) < 0.5;
    two += std::abs(x - 2.0) < 1.0;
  }
  BOOST_TEST(std::abs(one / 20000.0 - 0.6827) < 0.02);
  BOOST_TEST(std::abs(two / 20000.0 - 0.9545) < 0.01);
  for (double x : v) BOOST_TEST_REQUIRE(std::isfinite(x));
}

// Large initialisations are filled on the pool: the pieces, however many, write the same bits.
BOOST_AUTO_TEST_CASE(initialisers_write_the_same_bits_on_one_thread_and_on_several) {
  const int saved = num_threads();
  detail::force_excess(0);  // a quiet machine: every thread of the pool takes a piece
  const Shape shape{3, 100003};  // an odd size, so the pieces are unequal
  std::vector<std::vector<double>> draws[2];
  for (int i = 0; i < 2; ++i) {
    set_num_threads(i == 0 ? 1 : 3);
    for (DType dtype : kDTypes) {
      Generator gen(42);
      draws[i].push_back(values(normal(shape, 0.5, 2.0, gen, dtype)));
      draws[i].push_back(values(uniform(shape, -1.0, 3.0, gen, dtype)));
    }
  }
  set_num_threads(saved);
  detail::force_excess(-1);
  for (size_t k = 0; k < draws[0].size(); ++k) {
    BOOST_TEST_CONTEXT("draw " << k) { BOOST_CHECK(draws[0][k] == draws[1][k]); }
  }
}

BOOST_AUTO_TEST_CASE(uniform_bits_map_into_the_unit_interval) {
  for (uint64_t i = 0; i < 1000; ++i) {
    const float f = Generator::uniform_f32(123, i);
    const double d = Generator::uniform_f64(123, i);
    BOOST_TEST_REQUIRE((f >= 0.0f && f < 1.0f));
    BOOST_TEST_REQUIRE((d >= 0.0 && d < 1.0));
  }
}

BOOST_AUTO_TEST_CASE(uniform_f32_never_reaches_high) {
  // With this seed element 242 draws u = 0.9999999846..., which rounds to 1.0f (and -1 + 4u to
  // 3.0f): the value must still stay below `high`.
  for (const auto& [low, high] : {std::pair{0.0, 1.0}, std::pair{-1.0, 3.0}}) {
    Generator g(369253);
    const std::vector<double> v = values(uniform({256}, low, high, g, DType::f32));
    for (double x : v) BOOST_TEST_REQUIRE((x >= low && x < high), x << " outside [" << low << ", " << high << ")");
    BOOST_TEST(v[242] == static_cast<double>(std::nextafter(static_cast<float>(high), 0.0f)));
  }
}

BOOST_AUTO_TEST_CASE(degenerate_ranges) {
  Generator g(1);
  BOOST_TEST(values(uniform({5}, 2.0, 2.0, g, DType::f64)) == std::vector<double>(5, 2.0));
  BOOST_TEST(values(normal({5}, -1.0, 0.0, g, DType::f64)) == std::vector<double>(5, -1.0));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
