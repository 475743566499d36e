// KvCache (layers/kv_cache.h): append/views/length/reset, the offset causal mask, refusals with
// shapes; and the modules' own forwards given a cache (MultiHeadAttention, TransformerBlock),
// chunk after chunk equal to the same forward over every position without one.
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

BOOST_AUTO_TEST_CASE(the_causal_mask_offsets_new_queries_by_the_cached_positions) {
  KvCache cache(small_cache(6));
  BOOST_TEST(cache.causal_mask(0, 1).empty());  // one new query sees every key
  const Tensor first = cache.causal_mask(0, 3).keep_tensor();
  BOOST_TEST(max_abs_diff(first, AttentionMask::causal(3).keep_tensor()) == 0.0);
  cache.append(0, randn({2, 3, 2, 4}, 1), randn({2, 3, 2, 2}, 2));
  // Queries at positions 2, 3, 4 over keys 0 .. 4.
  const Tensor after = cache.causal_mask(0, 3).keep_tensor();
  BOOST_TEST(after.shape() == (Shape{1, 1, 3, 5}));
  BOOST_TEST(max_abs_diff(after, AttentionMask::causal(5).keep_tensor().narrow(2, 2, 3)) == 0.0);
  BOOST_TEST(cache.causal_mask(1, 2).keep_tensor().shape() == (Shape{1, 1, 2, 2}));  // layer 1 is empty
  AG_CHECK_THROWS_WITH(cache.causal_mask(0, 5), std::invalid_argument, "KvCache::causal_mask", "holds 2",
                       "max_len=6", "t_new=5");
  AG_CHECK_THROWS_WITH(cache.causal_mask(0, 0), std::invalid_argument, "t_new=0");
  AG_CHECK_THROWS_WITH(cache.causal_mask(3, 1), std::invalid_argument, "layer 3");
  AG_CHECK_THROWS_WITH(cache.layer(2), std::invalid_argument, "KvCache::layer", "layer 2", "n_layers=2");
  AG_CHECK_THROWS_WITH(cache.memory_layer(-1), std::invalid_argument, "KvCache::memory_layer", "layer -1");
}

// Chunks of 3, 1 and 3 new positions through MultiHeadAttention::forward with the cache give
// the rows of the same forward over all 7 with a causal mask, with d_k != d_v and a batch of 2;
// and so do the attention weights.
BOOST_AUTO_TEST_CASE(self_attention_with_a_cache_equals_its_causal_forward) {
  manual_seed(5);
  MultiHeadAttention mha({.d_model = 6, .n_head = 2, .d_k = 4, .d_v = 5});
  mha.to(DType::f64);
  const Tensor x = randn({2, 7, 6}, 6);
  const AttentionOutput full = mha.forward(Variable(x), AttentionMask::causal(7), {}, true);
  NoGradGuard no_grad;
  KvCache cache({.n_layers = 1, .batch = 2, .n_head = 2, .d_k = 4, .d_v = 5, .max_len = 8, .dtype = DType::f64});
  std::vector<Tensor> weights;
  const Tensor cached = in_chunks(x, {3, 1, 3}, [&](const Variable& c) {
    const AttentionMask mask = cache.causal_mask(0, c.shape()[1]);
    AttentionOutput r = mha.forward(c, mask, {}, true, cache.layer(0));
    weights.push_back(r.weights);
    return r.output;
  });
  BOOST_TEST(max_abs_diff(cached, full.output.value()) < 1e-12);
  BOOST_TEST(cache.length() == 7);
  // The last chunk's queries (positions 4..6) weigh all 7 keys as the full forward's rows do.
  BOOST_TEST(weights.back().shape() == (Shape{2, 2, 3, 7}));
  BOOST_TEST(max_abs_diff(weights.back(), full.weights.narrow(2, 4, 3)) < 1e-12);
  // The cache is what makes this right: the last chunk alone, without it, sees only itself.
  const Tensor alone = mha.forward(Variable(x.narrow(1, 4, 3)), AttentionMask::causal(3)).output.value();
  BOOST_TEST(max_abs_diff(alone, full.output.value().narrow(1, 4, 3)) > 1e-3);
  // And the offset mask is what keeps a chunk's first query from its later keys.
  const Tensor unmasked = mha.forward(Variable(x), AttentionMask()).output.value();
  BOOST_TEST(max_abs_diff(unmasked, full.output.value()) > 1e-3);
}

BOOST_AUTO_TEST_CASE(blocks_with_a_cache_equal_their_causal_forward) {
  for (const bool norm_first : {true, false}) {
    BOOST_TEST_CONTEXT("norm_first " << norm_first) {
      manual_seed(7);
      TransformerBlock block({.d_model = 8, .n_head = 2, .d_ff = 12, .dropout = 0.2,
                              .activation = Activation::gelu, .norm_first = norm_first});
      block.to(DType::f64);
      block.eval();  // dropout set but inactive: the cached call follows the mode too
      const Tensor x = randn({1, 6, 8}, 8);
      const Tensor full = block.forward(Variable(x), AttentionMask::causal(6)).value();
      NoGradGuard no_grad;
      KvCache cache({.n_layers = 3, .batch = 1, .n_head = 2, .d_k = 4, .max_len = 6, .dtype = DType::f64});
      const Tensor cached = in_chunks(x, {1, 1, 2, 1, 1}, [&](const Variable& c) {
        return block.forward(c, cache.causal_mask(2, c.shape()[1]), {}, cache.layer(2));
      });
      BOOST_TEST(max_abs_diff(cached, full) < 1e-12);
      BOOST_TEST(cache.length(2) == 6);
      BOOST_TEST(cache.length(0) == 0);  // only the named layer advanced
      // Without the cache the last position sees only itself.
      const Tensor alone = block.forward(Variable(x.narrow(1, 5, 1))).value();
      BOOST_TEST(max_abs_diff(alone, full.narrow(1, 5, 1)) > 1e-3);
    }
  }
}

// Cross-attention through a memory layer: the first call projects the memory (B, S, k_dim) into
// the cache, later calls read it and project only their queries. The later calls are given
// another memory of the same shape: their output shows it was never read.
BOOST_AUTO_TEST_CASE(cross_attention_projects_the_memory_once_into_a_memory_layer) {
  manual_seed(11);
  MultiHeadAttention cross({.d_model = 6, .n_head = 2, .d_k = 3, .d_v = 4, .k_dim = 5, .v_dim = 5});
  cross.to(DType::f64);
  const Tensor q = randn({2, 4, 6}, 12), memory = randn({2, 5, 5}, 13);
  const AttentionMask padding = AttentionMask::key_padding({3, 5}, 5);
  const Tensor full = cross.forward(Variable(q), Variable(memory), Variable(memory), padding).output.value();
  NoGradGuard no_grad;
  KvCache kv({.n_layers = 1, .batch = 2, .n_head = 2, .d_k = 3, .d_v = 4, .max_len = 5, .dtype = DType::f64});
  const Variable other(randn({2, 5, 5}, 14));
  bool first = true;
  const Tensor cached = in_chunks(q, {2, 1, 1}, [&](const Variable& c) {
    const Variable m = first ? Variable(memory) : other;
    first = false;
    return cross.forward(c, m, m, padding, {}, false, kv.memory_layer(0)).output;
  });
  BOOST_TEST(max_abs_diff(cached, full) < 1e-12);
  BOOST_TEST(kv.length() == 5);  // stored once, never appended again
  const Tensor with_other = cross.forward(Variable(q), other, other, padding).output.value();
  BOOST_TEST(max_abs_diff(with_other, full) > 1e-3);
  // A memory of another length than the stored one is refused.
  AG_CHECK_THROWS_WITH(cross.forward(Variable(q), Variable(randn({2, 4, 5}, 15)), Variable(randn({2, 4, 5}, 15)), {},
                                     {}, false, kv.memory_layer(0)),
                       std::invalid_argument, "memory layer 0", "holds 5", "key=(2, 4, 5)");
}

BOOST_AUTO_TEST_CASE(attention_with_a_cache_refuses_grad_mode_and_caches_that_do_not_fit) {
  manual_seed(9);
  MultiHeadAttention mha({.d_model = 6, .n_head = 2});
  const Variable x(randn({1, 2, 6}, 10, DType::f32));
  KvCache cache({.n_layers = 1, .batch = 1, .n_head = 2, .d_k = 3, .max_len = 3});
  AG_CHECK_THROWS_WITH(mha.forward(x, cache.causal_mask(0, 2), {}, false, cache.layer(0)), std::logic_error,
                       "MultiHeadAttention", "KvCache", "NoGradGuard");
  BOOST_TEST(cache.length() == 0);
  NoGradGuard no_grad;
  KvCache heads({.n_layers = 1, .batch = 1, .n_head = 3, .d_k = 2, .max_len = 3});
  AG_CHECK_THROWS_WITH(mha.forward(x, {}, {}, false, heads.layer(0)), std::invalid_argument, "MultiHeadAttention",
                       "H=3", "H=2", "(1, 2, 6)");
  KvCache batch({.n_layers = 1, .batch = 2, .n_head = 2, .d_k = 3, .max_len = 3});
  AG_CHECK_THROWS_WITH(mha.forward(x, {}, {}, false, batch.layer(0)), std::invalid_argument, "B=2", "(1, 2, 6)");
  KvCache f64({.n_layers = 1, .batch = 1, .n_head = 2, .d_k = 3, .max_len = 3, .dtype = DType::f64});
  AG_CHECK_THROWS_WITH(mha.forward(x, {}, {}, false, f64.layer(0)), std::invalid_argument, "f64", "f32");
  AG_CHECK_THROWS_WITH(mha.forward(Variable(randn({1, 2, 5}, 1, DType::f32)), {}, {}, false, cache.layer(0)),
                       std::invalid_argument, "(1, 2, 5)", "6");
  // A mask for the new positions alone does not cover the cached keys.
  mha.forward(Variable(x.value().narrow(1, 0, 1)), {}, {}, false, cache.layer(0));
  AG_CHECK_THROWS_WITH(mha.forward(x, AttentionMask::causal(2), {}, false, cache.layer(0)), std::invalid_argument,
                       "MultiHeadAttention", "causal(2)", "(1, 2, 2, 3)");
  BOOST_TEST(cache.length() == 1);  // the refused call appended nothing
  mha.forward(x, cache.causal_mask(0, 2), {}, false, cache.layer(0));
  AG_CHECK_THROWS_WITH(mha.forward(x, {}, {}, false, cache.layer(0)), std::invalid_argument, "layer 0",
                       "holds 3", "2 more", "max_len=3");
  BOOST_TEST(cache.length() == 3);
  MultiHeadAttention cross({.d_model = 6, .n_head = 2, .k_dim = 4, .v_dim = 4});
  AG_CHECK_THROWS_WITH(cross.forward(x, {}, {}, false, cache.layer(0)), std::invalid_argument, "key (B, Tk, 4)");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
