// KvCache (layers/kv_cache.h) and the cached attention entry points (layers/cached_attention.h):
// append/views/length/reset, refusals with shapes, and cached self-attention and blocks equal to
// the causal full forward, chunk after chunk.
#include <boost/test/unit_test.hpp>

#include "layer_support.h"

namespace ag::testing {

namespace {

KvCacheOptions small_cache(int64_t max_len = 5) {
  return {.n_layers = 2, .batch = 2, .n_head = 3, .d_k = 4, .d_v = 2, .max_len = max_len, .dtype = DType::f64};
}

// Feeds x (B, T, C) through `step` in chunks of the given sizes and concatenates the outputs on T.
template <class Step>
Tensor in_chunks(const Tensor& x, const std::vector<int64_t>& sizes, Step step) {
  std::vector<Variable> parts;
  int64_t at = 0;
  for (int64_t n : sizes) {
    parts.push_back(step(Variable(x.narrow(1, at, n))));
    at += n;
  }
  BOOST_REQUIRE(at == x.shape()[1]);
  return concat(parts, 1).value();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kv_cache)

BOOST_AUTO_TEST_CASE(appends_positions_and_shows_them_as_views) {
  KvCache cache(small_cache());
  BOOST_TEST(cache.length() == 0);
  BOOST_TEST(cache.keys(0).shape() == (Shape{2, 3, 0, 4}));
  const Tensor k1 = randn({2, 3, 2, 4}, 1), v1 = randn({2, 3, 2, 2}, 2);
  const Tensor k2 = randn({2, 1, 3, 4}, 3).permute({0, 2, 1, 3}), v2 = randn({2, 3, 1, 2}, 4);
  cache.append(0, k1, v1);
  cache.append(0, k2, v2);  // k2 is a permuted view: any strides
  BOOST_TEST(cache.length(0) == 3);
  BOOST_TEST(cache.length(1) == 0);
  BOOST_TEST(max_abs_diff(cache.keys(0), kernels::concat({k1, k2}, 2)) == 0.0);
  BOOST_TEST(max_abs_diff(cache.values(0), kernels::concat({v1, v2}, 2)) == 0.0);
  // Views of one buffer, no copy: two calls see the same storage.
  BOOST_TEST(cache.keys(0).shares_storage_with(cache.keys(0)));
  BOOST_TEST(cache.remaining() == 2);
  // A step interrupted between layers is visible.
  AG_CHECK_THROWS_WITH(cache.length(), std::logic_error, "layer 0: 3", "layer 1: 0");
  cache.append(1, kernels::concat({k1, k2}, 2), kernels::concat({v1, v2}, 2));
  BOOST_TEST(cache.length() == 3);
  cache.reset();
  BOOST_TEST(cache.length() == 0);
  BOOST_TEST(cache.remaining() == 5);
  cache.append(0, k2, v2);  // storage reused from position 0
  BOOST_TEST(max_abs_diff(cache.keys(0), k2) == 0.0);
}

BOOST_AUTO_TEST_CASE(wrong_shapes_dtypes_layers_and_overflow_are_refused) {
  KvCache cache(small_cache(3));
  const Tensor k = randn({2, 3, 2, 4}, 1), v = randn({2, 3, 2, 2}, 2);
  AG_CHECK_THROWS_WITH(cache.append(0, randn({1, 3, 2, 4}, 1), v), std::invalid_argument, "KvCache::append",
                       "(B=2, H=3, T_new, 4)", "k=(1, 3, 2, 4)");
  AG_CHECK_THROWS_WITH(cache.append(0, randn({2, 2, 2, 4}, 1), v), std::invalid_argument, "k=(2, 2, 2, 4)");
  AG_CHECK_THROWS_WITH(cache.append(0, randn({2, 3, 2, 5}, 1), v), std::invalid_argument, "k=(2, 3, 2, 5)");
  AG_CHECK_THROWS_WITH(cache.append(0, k, randn({2, 3, 2, 4}, 2)), std::invalid_argument, "v=(2, 3, 2, 4)");
  AG_CHECK_THROWS_WITH(cache.append(0, k, randn({2, 3, 1, 2}, 2)), std::invalid_argument, "same T_new");
  AG_CHECK_THROWS_WITH(cache.append(0, randn({2, 3, 8}, 1), v), std::invalid_argument, "(2, 3, 8)");
  AG_CHECK_THROWS_WITH(cache.append(0, k.to(DType::f32), v), std::invalid_argument, "holds f64", "f32");
  AG_CHECK_THROWS_WITH(cache.append(2, k, v), std::invalid_argument, "layer 2", "n_layers=2");
  AG_CHECK_THROWS_WITH(cache.keys(-1), std::invalid_argument, "KvCache::keys", "layer -1");
  cache.append(0, k, v);
  AG_CHECK_THROWS_WITH(cache.append(0, k, v), std::invalid_argument, "holds 2 of max_len=3", "2 more");
  BOOST_TEST(cache.length(0) == 2);  // the refused append changed nothing
  AG_CHECK_THROWS_WITH(KvCache(KvCacheOptions{.n_layers = 1, .batch = 1, .n_head = 0, .d_k = 4, .max_len = 3}),
                       std::invalid_argument, "n_head=0");
  AG_CHECK_THROWS_WITH(KvCache(KvCacheOptions{.n_layers = 1, .batch = 1, .n_head = 1, .d_k = 4, .max_len = -3}),
                       std::invalid_argument, "max_len=-3");
}

// Chunks of 3, 1 and 3 new positions through cached_self_attention give the rows of the causal
// forward over all 7, with d_k != d_v and a batch of 2.
BOOST_AUTO_TEST_CASE(cached_self_attention_equals_causal_attention) {
  manual_seed(5);
  MultiHeadAttention mha({.d_model = 6, .n_head = 2, .d_k = 4, .d_v = 5});
  mha.to(DType::f64);
  const Tensor x = randn({2, 7, 6}, 6);
  const Tensor full = mha.forward(Variable(x), AttentionMask::causal(7)).output.value();
  NoGradGuard no_grad;
  KvCache cache({.n_layers = 1, .batch = 2, .n_head = 2, .d_k = 4, .d_v = 5, .max_len = 8, .dtype = DType::f64});
  const Tensor cached = in_chunks(x, {3, 1, 3}, [&](const Variable& c) { return cached_self_attention(mha, c, cache, 0); });
  BOOST_TEST(max_abs_diff(cached, full) < 1e-12);
  BOOST_TEST(cache.length() == 7);
  // Without the offset mask a chunk's first query would see its later keys: the check bites.
  const Tensor unmasked = mha.forward(Variable(x), AttentionMask()).output.value();
  BOOST_TEST(max_abs_diff(unmasked, full) > 1e-3);
}

BOOST_AUTO_TEST_CASE(cached_blocks_equal_blocks_with_a_causal_mask) {
  for (const bool norm_first : {true, false}) {
    BOOST_TEST_CONTEXT("norm_first " << norm_first) {
      manual_seed(7);
      TransformerBlock block({.d_model = 8, .n_head = 2, .d_ff = 12, .dropout = 0.2,
                              .activation = Activation::gelu, .norm_first = norm_first});
      block.to(DType::f64);
      block.eval();  // dropout set but inactive: the cached path follows the mode too
      const Tensor x = randn({1, 6, 8}, 8);
      const Tensor full = block.forward(Variable(x), AttentionMask::causal(6)).value();
      NoGradGuard no_grad;
      KvCache cache({.n_layers = 3, .batch = 1, .n_head = 2, .d_k = 4, .max_len = 6, .dtype = DType::f64});
      const Tensor cached =
          in_chunks(x, {1, 1, 2, 1, 1}, [&](const Variable& c) { return cached_block_forward(block, c, cache, 2); });
      BOOST_TEST(max_abs_diff(cached, full) < 1e-12);
      BOOST_TEST(cache.length(2) == 6);
      BOOST_TEST(cache.length(0) == 0);  // only the named layer advanced
    }
  }
}

BOOST_AUTO_TEST_CASE(cached_attention_refuses_grad_mode_and_caches_that_do_not_fit) {
  manual_seed(9);
  MultiHeadAttention mha({.d_model = 6, .n_head = 2});
  const Variable x(randn({1, 2, 6}, 10, DType::f32));
  KvCache cache({.n_layers = 1, .batch = 1, .n_head = 2, .d_k = 3, .max_len = 3});
  AG_CHECK_THROWS_WITH(cached_self_attention(mha, x, cache, 0), std::logic_error, "NoGradGuard");
  NoGradGuard no_grad;
  KvCache heads({.n_layers = 1, .batch = 1, .n_head = 3, .d_k = 2, .max_len = 3});
  AG_CHECK_THROWS_WITH(cached_self_attention(mha, x, heads, 0), std::invalid_argument, "H=3", "H=2", "(1, 2, 6)");
  KvCache batch({.n_layers = 1, .batch = 2, .n_head = 2, .d_k = 3, .max_len = 3});
  AG_CHECK_THROWS_WITH(cached_self_attention(mha, x, batch, 0), std::invalid_argument, "B=2", "(1, 2, 6)");
  AG_CHECK_THROWS_WITH(cached_self_attention(mha, Variable(randn({1, 2, 5}, 1, DType::f32)), cache, 0),
                       std::invalid_argument, "(1, 2, 5)", "d_model=6");
  AG_CHECK_THROWS_WITH(cached_self_attention(mha, x, cache, 1), std::invalid_argument, "layer 1");
  cached_self_attention(mha, x, cache, 0);
  AG_CHECK_THROWS_WITH(cached_self_attention(mha, x, cache, 0), std::invalid_argument, "holds 2", "max_len=3");
  BOOST_TEST(cache.length() == 2);
  MultiHeadAttention cross({.d_model = 6, .n_head = 2, .k_dim = 4, .v_dim = 4});
  AG_CHECK_THROWS_WITH(cached_self_attention(cross, x, cache, 0), std::invalid_argument, "k_dim=4");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
