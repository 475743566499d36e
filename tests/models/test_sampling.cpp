// Sampling (models/gpt/generate.h): the distribution after temperature, top-k and top-p, written
// out by hand here; draws that follow it, counter-based per (seed, draw); bad logits.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <numeric>

#include "models_support.h"

namespace ag::testing {

namespace {

// softmax(logits / temperature) over the tokens in `kept` (zeros elsewhere).
std::vector<double> softmax_over(const std::vector<double>& logits, double temperature, const std::vector<size_t>& kept) {
  std::vector<double> p(logits.size(), 0.0);
  double total = 0;
  for (size_t i : kept) total += p[i] = std::exp(logits[i] / temperature);
  for (double& v : p) v /= total;
  return p;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  BOOST_REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::abs(got[i] - want[i]) < 1e-12, "token " << i << ": " << got[i] << " vs " << want[i]);
}

const std::vector<double> kLogits = {std::log(0.05), std::log(0.5), std::log(0.15), std::log(0.3)};

}  // namespace

BOOST_AUTO_TEST_SUITE(sampling)

BOOST_AUTO_TEST_CASE(greedy_picks_the_most_likely_token_lowest_id_on_a_tie) {
  const SamplingOptions greedy{.temperature = 0.0, .top_k = 0, .top_p = 1.0, .seed = 9};
  check_close(sampling_distribution({1.0, 3.0, 2.0, 3.0}, greedy), {0, 1, 0, 0});
  for (uint64_t draw = 0; draw < 50; ++draw) BOOST_TEST(sample_token({1.0, 3.0, 2.0, 3.0}, greedy, draw) == 1);
  // top_k 1 is greedy too, whatever the temperature and draw.
  for (uint64_t draw = 0; draw < 50; ++draw) BOOST_TEST(sample_token(kLogits, {.temperature = 2.0, .top_k = 1}, draw) == 1);
}

BOOST_AUTO_TEST_CASE(temperature_divides_the_logits) {
  for (const double t : {0.5, 1.0, 2.0}) {
    check_close(sampling_distribution(kLogits, {.temperature = t}), softmax_over(kLogits, t, {0, 1, 2, 3}));
  }
  // A tiny temperature is (numerically) greedy, without overflow or NaN.
  check_close(sampling_distribution({1.0, 1.5, -2.0}, {.temperature = 1e-300}), {0, 1, 0});
}

BOOST_AUTO_TEST_CASE(top_k_keeps_the_k_most_likely_tokens) {
  check_close(sampling_distribution(kLogits, {.top_k = 2}), softmax_over(kLogits, 1.0, {1, 3}));
  check_close(sampling_distribution(kLogits, {.top_k = 3}), softmax_over(kLogits, 1.0, {1, 2, 3}));
  check_close(sampling_distribution(kLogits, {.top_k = 10}), softmax_over(kLogits, 1.0, {0, 1, 2, 3}));
  // Ties at the cut: the lower ids stay (exactly k tokens).
  check_close(sampling_distribution({0.0, 1.0, 1.0, 1.0}, {.top_k = 2}), {0, 0.5, 0.5, 0});
}

BOOST_AUTO_TEST_CASE(top_p_keeps_the_smallest_set_reaching_p) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (tokens 1, 3, 2, 0).
  check_close(sampling_distribution(kLogits, {.top_p = 0.4}), {0, 1, 0, 0});
  check_close(sampling_distribution(kLogits, {.top_p = 0.7}), {0, 0.625, 0, 0.375});
  check_close(sampling_distribution(kLogits, {.top_p = 0.9}), softmax_over(kLogits, 1.0, {1, 2, 3}));
  check_close(sampling_distribution(kLogits, {.top_p = 1.0}), softmax_over(kLogits, 1.0, {0, 1, 2, 3}));
  // After top-k: the nucleus of the renormalised top 2 (0.625, 0.375) at p = 0.6 is token 1 alone.
  check_close(sampling_distribution(kLogits, {.top_k = 2, .top_p = 0.6}), {0, 1, 0, 0});
  // A token excluded beforehand (-inf) never comes back.
  check_close(sampling_distribution({0.0, -INFINITY, 0.0}, {}), {0.5, 0, 0.5});
}

BOOST_AUTO_TEST_CASE(draws_follow_the_distribution_and_depend_on_seed_and_draw_only) {
  const SamplingOptions o{.temperature = 1.0, .seed = 17};
  std::vector<int> counts(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(sample_token(kLogits, o, static_cast<uint64_t>(i)))];
  const std::vector<double> p = {0.05, 0.5, 0.15, 0.3};
  for (size_t i = 0; i < 4; ++i) {
    // Five standard deviations of a binomial count: a fixed seed makes this deterministic anyway.
    const double sd = std::sqrt(n * p[i] * (1 - p[i]));
    BOOST_TEST(std::abs(counts[i] - n * p[i]) < 5 * sd, "token " << i << ": " << counts[i]);
  }
  // top_k 2: tokens 0 and 2 are never drawn.
  for (uint64_t i = 0; i < 2000; ++i) {
    const int64_t t = sample_token(kLogits, {.top_k = 2, .seed = 5}, i);
    BOOST_TEST((t == 1 || t == 3));
  }
  // The same (seed, draw) gives the same token whatever ran in between; another seed differs.
  std::vector<int64_t> first, again, other;
  for (uint64_t i = 0; i < 64; ++i) first.push_back(sample_token(kLogits, o, i));
  manual_seed(123);  // the default generator plays no part
  for (uint64_t i = 0; i < 64; ++i) again.push_back(sample_token(kLogits, o, i));
  for (uint64_t i = 0; i < 64; ++i) other.push_back(sample_token(kLogits, {.seed = 18}, i));
  BOOST_TEST(first == again);
  BOOST_TEST(first != other);
}

BOOST_AUTO_TEST_CASE(bad_options_and_logits_are_refused) {
  AG_CHECK_THROWS_WITH(sampling_distribution(kLogits, {.temperature = -1.0}), std::invalid_argument, "temperature",
                       "-1");
  AG_CHECK_THROWS_WITH(sampling_distribution(kLogits, {.temperature = INFINITY}), std::invalid_argument, "temperature");
  AG_CHECK_THROWS_WITH(sampling_distribution(kLogits, {.top_k = -2}), std::invalid_argument, "top_k", "-2");
  AG_CHECK_THROWS_WITH(sampling_distribution(kLogits, {.top_p = -0.1}), std::invalid_argument, "top_p", "-0.1");
  AG_CHECK_THROWS_WITH(sampling_distribution(kLogits, {.top_p = NAN}), std::invalid_argument, "top_p", "nan");
  AG_CHECK_THROWS_WITH(sampling_distribution({}, {}), std::invalid_argument, "empty vocabulary");
  AG_CHECK_THROWS_WITH(sampling_distribution({0.0, NAN}, {}), std::invalid_argument, "logit nan", "token 1");
  AG_CHECK_THROWS_WITH(sampling_distribution({INFINITY, 0.0}, {}), std::invalid_argument, "logit inf", "token 0");
  AG_CHECK_THROWS_WITH(sampling_distribution({-INFINITY, -INFINITY}, {}), std::invalid_argument, "all 2 logits");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
