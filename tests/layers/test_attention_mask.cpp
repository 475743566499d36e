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

BOOST_AUTO_TEST_CASE(keep_validates_values_and_takes_named_axes) {
  const Tensor t = from_vector(std::vector<double>{1, 0, 1, 1, 1, 0}, {2, 3}, DType::f64);
  const AttentionMask m = AttentionMask::keep(t);  // (Tq, Tk), shared by every batch element and head
  BOOST_TEST(m.keep_tensor().shape() == (Shape{1, 1, 2, 3}));
  BOOST_TEST(m.keep_tensor().to_vector() == t.to_vector(), boost::test_tools::per_element());
  AG_CHECK_THROWS_WITH(AttentionMask::keep(from_vector(std::vector<double>{1, 0.5}, {1, 2})), std::invalid_argument,
                       "keep", "0.5", "flat index 1", "(1, 2)");
  AG_CHECK_THROWS_WITH(AttentionMask::keep(ones({1, 1, 1, 2, 2})), std::invalid_argument, "(1, 1, 1, 2, 2)",
                       "(B, H, Tq, Tk)");
  AG_CHECK_THROWS_WITH(AttentionMask::keep(ones({2})), std::invalid_argument, "(2,)", "key_padding");
  AG_CHECK_THROWS_WITH(AttentionMask::keep(Tensor()), std::invalid_argument, "undefined");
  AG_CHECK_THROWS_WITH(AttentionMask::keep_per_batch(ones({2, 2})), std::invalid_argument, "(B, Tq, Tk)", "(2, 2)");
  AG_CHECK_THROWS_WITH(AttentionMask::keep_per_head(ones({2, 2})), std::invalid_argument, "(H, Tq, Tk)", "(2, 2)");
}

// A rank-3 keep tensor with B equal to the head count is never read as per-head: keep() refuses
// it and says how to name the axes; keep_per_batch gives it the per-batch meaning, all the way
// to the attention output, and keep_per_head the per-head one.
BOOST_AUTO_TEST_CASE(rank_3_keep_is_refused_or_named_never_taken_as_per_head) {
  const int64_t B = 2, H = 2, T = 3;
  Tensor t = ones({B, T, T});
  for (int64_t q = 0; q < T; ++q) {
    for (int64_t j = 1; j < T; ++j) t.set({1, q, j}, 0.0);  // batch element 1 sees key 0 only
  }
  AG_CHECK_THROWS_WITH(AttentionMask::keep(t), std::invalid_argument, "AttentionMask::keep", "(2, 3, 3)",
                       "keep_per_batch", "keep_per_head", "(B, H, Tq, Tk)");
  const AttentionMask per_batch = AttentionMask::keep_per_batch(t);
  BOOST_TEST(per_batch.shape() == (Shape{B, 1, T, T}));
  BOOST_TEST(per_batch.description() == "keep_per_batch(2, 3, 3)");
  const AttentionMask per_head = AttentionMask::keep_per_head(t);
  BOOST_TEST(per_head.shape() == (Shape{1, H, T, T}));

  const Variable q(randn({B, H, T, 4}, 1, DType::f64)), k(randn({B, H, T, 4}, 2, DType::f64));
  const Variable v(randn({B, H, T, 5}, 3, DType::f64));
  const AttentionResult r = scaled_dot_product_attention(q, k, v, per_batch);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < T; ++i) {
      // Batch 1, every head: all weight on key 0, so the output is v's key-0 row.
      BOOST_TEST(r.weights.at({1, h, i, 0}) == 1.0);
      for (int64_t d = 0; d < 5; ++d) BOOST_TEST(r.output.value().at({1, h, i, d}) == v.value().at({1, h, 0, d}));
      // Batch 0, every head: all three keys weighted.
      for (int64_t j = 0; j < T; ++j) BOOST_TEST(r.weights.at({0, h, i, j}) > 0.0);
    }
  }
  // Per head instead: head 1 of batch 0 sees key 0 only.
  const AttentionResult rh = scaled_dot_product_attention(q, k, v, per_head);
  BOOST_TEST(rh.weights.at({0, 1, 2, 0}) == 1.0);
  BOOST_TEST(rh.weights.at({0, 0, 2, 2}) > 0.0);
}

BOOST_AUTO_TEST_CASE(causal_with_offset_sees_the_cached_keys) {
  const AttentionMask m = AttentionMask::causal(2, 3);  // queries at positions 3 and 4 of 5 keys
  BOOST_TEST(m.shape() == (Shape{1, 1, 2, 5}));
  BOOST_TEST(m.description() == "causal(2, offset=3)");
  BOOST_TEST(m.is_causal());
  BOOST_TEST(m.causal_offset() == 3);
  BOOST_TEST(!m.keep_pattern().defined());  // no dense tensor behind it
  BOOST_TEST(m.keep_tensor().to_vector() == (std::vector<double>{1, 1, 1, 1, 0, 1, 1, 1, 1, 1}),
             boost::test_tools::per_element());
  std::vector<int64_t> reach;
  m.reach_of(0, 0, 2, 5, reach);
  BOOST_TEST(reach == (std::vector<int64_t>{4, 5}), boost::test_tools::per_element());
  // One query after its cache sees every key: only the shape is left.
  BOOST_TEST(AttentionMask::causal(1, 4).keep_tensor().to_vector() == std::vector<double>(5, 1.0),
             boost::test_tools::per_element());
  AG_CHECK_THROWS_WITH(AttentionMask::causal(2, -1), std::invalid_argument, "causal", "offset=-1");
}

BOOST_AUTO_TEST_CASE(combined_structure_gives_each_row_its_reach) {
  // causal after 1 cached key, lengths 3 and 1 (and 2 from a second padding), a pattern hiding
  // key 1 of query 1 in batch 0's pattern.
  Tensor pattern = ones({2, 3});
  pattern.set({1, 1}, 0.0);
  const AttentionMask m = AttentionMask::causal(2, 1) & AttentionMask::key_padding({3, 1}, 3) &
                          AttentionMask::key_padding({2, 3}, 3) & AttentionMask::keep(pattern);
  BOOST_TEST(m.shape() == (Shape{2, 1, 2, 3}));
  BOOST_TEST(m.key_lengths() == (std::vector<int64_t>{2, 1}), boost::test_tools::per_element());
  BOOST_TEST(!m.same_for_every_slice());
  std::vector<int64_t> reach;
  m.reach_of(0, 0, 2, 3, reach);  // row 0: causal 2, length 2 -> 2; row 1: causal 3, length 2 -> 2 -> key 1 hidden -> 1
  BOOST_TEST(reach == (std::vector<int64_t>{2, 1}), boost::test_tools::per_element());
  m.reach_of(1, 0, 2, 3, reach);
  BOOST_TEST(reach == (std::vector<int64_t>{1, 1}), boost::test_tools::per_element());
  BOOST_TEST(m.keep_tensor().to_vector() == (std::vector<double>{1, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0}),
             boost::test_tools::per_element());
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
  // causal & a zero length: only the padding empties rows.
  const Tensor padded = (AttentionMask::causal(3) & AttentionMask::key_padding({0, 3}, 3)).rows_with_keys();
  BOOST_TEST(padded.to_vector() == (std::vector<double>{0, 1}), boost::test_tools::per_element());
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
