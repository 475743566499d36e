// Named attention masks: what each constructor builds, how masks combine, and the checks
// against the attention shape. AttentionBias: validation.
#include <boost/test/unit_test.hpp>

#include <limits>

#include "layer_support.h"

namespace ag::testing {

BOOST_AUTO_TEST_SUITE(attention_mask)

BOOST_AUTO_TEST_CASE(causal_keeps_the_lower_triangle) {
  const AttentionMask m = AttentionMask::causal(4);
  const Tensor& k = m.keep_tensor();
  BOOST_REQUIRE(k.shape() == (Shape{1, 1, 4, 4}));
  for (int64_t q = 0; q < 4; ++q) {
    for (int64_t j = 0; j < 4; ++j) BOOST_TEST(k.at({0, 0, q, j}) == (j <= q ? 1.0 : 0.0));
  }
  BOOST_TEST(m.description() == "causal(4)");
  AG_CHECK_THROWS_WITH(AttentionMask::causal(0), std::invalid_argument, "causal", "0");
}

BOOST_AUTO_TEST_CASE(key_padding_keeps_each_sequence_prefix) {
  const AttentionMask m = AttentionMask::key_padding({3, 1, 0}, 4);
  BOOST_REQUIRE(m.keep_tensor().shape() == (Shape{3, 1, 1, 4}));
  const std::vector<double> expected{1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  BOOST_TEST(m.keep_tensor().to_vector() == expected, boost::test_tools::per_element());
  const AttentionMask from_indices = AttentionMask::key_padding(Indices({3}, {3, 1, 0}), 4);
  BOOST_TEST(max_abs_diff(from_indices.keep_tensor(), m.keep_tensor()) == 0.0);
  AG_CHECK_THROWS_WITH(AttentionMask::key_padding({2, 5}, 4), std::invalid_argument, "key_padding", "length 5",
                       "batch element 1", "Tk=4");
  AG_CHECK_THROWS_WITH(AttentionMask::key_padding({-1}, 4), std::invalid_argument, "length -1");
  AG_CHECK_THROWS_WITH(AttentionMask::key_padding(Indices({1, 2}, {1, 2}), 4), std::invalid_argument, "(1, 2)");
}

BOOST_AUTO_TEST_CASE(keep_validates_values_and_right_aligns_the_shape) {
  const Tensor t = from_vector(std::vector<double>{1, 0, 1, 1, 1, 0}, {2, 3}, DType::f64);
  const AttentionMask m = AttentionMask::keep(t);
  BOOST_TEST(m.keep_tensor().shape() == (Shape{1, 1, 2, 3}));
  BOOST_TEST(m.keep_tensor().to_vector() == t.to_vector(), boost::test_tools::per_element());
  AG_CHECK_THROWS_WITH(AttentionMask::keep(from_vector(std::vector<double>{1, 0.5}, {2})), std::invalid_argument,
                       "keep", "0.5", "flat index 1", "(2,)");
  AG_CHECK_THROWS_WITH(AttentionMask::keep(ones({1, 1, 1, 2, 2})), std::invalid_argument, "(1, 1, 1, 2, 2)",
                       "4 dimensions");
  AG_CHECK_THROWS_WITH(AttentionMask::keep(Tensor()), std::invalid_argument, "undefined");
}

BOOST_AUTO_TEST_CASE(and_keeps_only_what_both_keep) {
  const AttentionMask m = AttentionMask::causal(3) & AttentionMask::key_padding({2, 3}, 3);
  BOOST_REQUIRE(m.keep_tensor().shape() == (Shape{2, 1, 3, 3}));
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t len = b == 0 ? 2 : 3;
    for (int64_t q = 0; q < 3; ++q) {
      for (int64_t j = 0; j < 3; ++j) {
        BOOST_TEST(m.keep_tensor().at({b, 0, q, j}) == (j <= q && j < len ? 1.0 : 0.0));
      }
    }
  }
  BOOST_TEST(m.description() == "causal(3) & key_padding(B=2, Tk=3)");
  // The empty mask is the identity of &.
  const AttentionMask c = AttentionMask::causal(3);
  BOOST_TEST(max_abs_diff((AttentionMask() & c).keep_tensor(), c.keep_tensor()) == 0.0);
  AttentionMask acc;
  BOOST_TEST(acc.empty());
  acc &= c;
  BOOST_TEST(!acc.empty());
  AG_CHECK_THROWS_WITH(AttentionMask::causal(3) & AttentionMask::causal(4), std::invalid_argument, "causal(3)",
                       "causal(4)", "(1, 1, 3, 3)", "(1, 1, 4, 4)");
}

BOOST_AUTO_TEST_CASE(check_names_the_op_the_mask_and_both_shapes) {
  const AttentionMask m = AttentionMask::key_padding({2, 2}, 4);
  m.check("op", 2, 3, 5, 4);  // broadcasts over heads and queries
  AG_CHECK_THROWS_WITH(m.check("op", 3, 1, 5, 4), std::invalid_argument, "op", "key_padding(B=2, Tk=4)",
                       "(2, 1, 1, 4)", "(3, 1, 5, 4)");
  AG_CHECK_THROWS_WITH(AttentionMask::causal(4).check("op", 1, 1, 4, 5), std::invalid_argument, "causal(4)");
  AttentionMask().check("op", 7, 7, 7, 7);  // the empty mask fits everything
}

BOOST_AUTO_TEST_CASE(rows_with_keys_marks_queries_that_see_nothing) {
  BOOST_TEST(!AttentionMask::causal(4).rows_with_keys().defined());  // every query sees itself
  const Tensor rows = AttentionMask::key_padding({2, 0, 1}, 3).rows_with_keys();
  BOOST_REQUIRE(rows.shape() == (Shape{3, 1, 1, 1}));
  BOOST_TEST(rows.to_vector() == (std::vector<double>{1, 0, 1}), boost::test_tools::per_element());
  // Per head: a row counts as seen when any head sees a key.
  Tensor keep = zeros({1, 2, 2, 3});
  keep.set({0, 1, 0, 2}, 1.0);
  const Tensor per_head = AttentionMask::keep(keep).rows_with_keys();
  BOOST_TEST(per_head.to_vector() == (std::vector<double>{1, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bias_must_be_finite_and_broadcast) {
  const AttentionBias bias(randn({1, 2, 3, 4}, 1));
  bias.check("op", 5, 2, 3, 4);
  AG_CHECK_THROWS_WITH(bias.check("op", 5, 3, 3, 4), std::invalid_argument, "op", "bias", "(1, 2, 3, 4)",
                       "(5, 3, 3, 4)");
  Tensor bad = zeros({3, 4});
  bad.set({1, 1}, -std::numeric_limits<double>::infinity());
  AG_CHECK_THROWS_WITH(AttentionBias{bad}, std::invalid_argument, "AttentionBias", "(3, 4)", "AttentionMask");
  AG_CHECK_THROWS_WITH(AttentionBias(zeros({1, 1, 1, 1, 2})), std::invalid_argument, "(1, 1, 1, 1, 2)");
  BOOST_TEST(AttentionBias().empty());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
