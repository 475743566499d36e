// The layers of Llama-shaped models: RMSNorm, RotaryEmbedding, SwiGLU, GroupedQueryAttention
// (with Qwen2's q/k/v biases and Qwen3's q/k norms) and LlamaBlock. Each passes check_layer;
// the attention and the block decode through a KvCache to the rows of the uncached forward;
// the rotary frequencies follow Llama 3's scaling; bad options and caches are refused. Their
// values against a PyTorch twin are tests/parity/test_llama_parity.cpp.
#include <cmath>
#include <numbers>

#include "layer_support.h"

namespace ag::testing {
namespace {

LayerCheckOptions checked_with(std::function<std::unique_ptr<Module>()> make_twin,
                               std::vector<std::string> zero_ok = {}) {
  LayerCheckOptions o;
  o.make_twin = std::move(make_twin);
  o.zero_ok = std::move(zero_ok);
  o.log = nullptr;  // the table goes into the assertion's message instead
  return o;
}

RotaryOptions rotary(int64_t head_dim, int64_t max_positions, double theta) {
  RotaryOptions o;
  o.head_dim = head_dim;
  o.max_positions = max_positions;
  o.theta = theta;
  return o;
}

// How many of the state_dict's entries are called `name` (0 or 1).
size_t entries(const Module& m, const std::string& name) {
  size_t n = 0;
  for (const auto& [key, value] : m.state_dict()) n += key == name;
  return n;
}

Shape entry_shape(const Module& m, const std::string& name) {
  for (const auto& [key, value] : m.state_dict()) {
    if (key == name) return value.shape();
  }
  return Shape();
}

GroupedQueryAttentionOptions attention(int64_t n_head, int64_t n_kv_head) {
  GroupedQueryAttentionOptions o;
  o.d_model = 8;
  o.n_head = n_head;
  o.n_kv_head = n_kv_head;
  o.head_dim = 4;
  o.rotary = rotary(0, 32, 100.0);
  return o;
}

BOOST_AUTO_TEST_SUITE(llama_layers)

BOOST_AUTO_TEST_CASE(rms_norm_and_swiglu_pass_check_layer) {
  manual_seed(1);
  RMSNorm norm(6, 1e-5);
  LayerCheckReport r = check_layer(norm, [](RMSNorm& m, const std::vector<Variable>& in) { return m(in[0]); },
                                   {randn_leaf({2, 3, 6}, 2, "x")},
                                   checked_with([] { return std::make_unique<RMSNorm>(6, 1e-5); }));
  BOOST_TEST(r.ok, r.table());
  BOOST_TEST(norm.parameters().size() == 1u);
  SwiGLU mlp(6, 10);
  r = check_layer(mlp, [](SwiGLU& m, const std::vector<Variable>& in) { return m(in[0]); },
                  {randn_leaf({2, 3, 6}, 3, "x")}, checked_with([] { return std::make_unique<SwiGLU>(6, 10); }));
  BOOST_TEST(r.ok, r.table());
  BOOST_TEST(entries(mlp, "gate_proj.weight") == 1u);
  BOOST_TEST(entries(mlp, "down_proj.bias") == 0u);
  AG_CHECK_THROWS_WITH(norm(Variable(zeros({2, 5}))), std::invalid_argument, "RMSNorm", "(2, 5)", "features=6");
  AG_CHECK_THROWS_WITH(RMSNorm(0), std::invalid_argument, "RMSNorm", "features=0");
  AG_CHECK_THROWS_WITH(SwiGLU(4, 0), std::invalid_argument, "SwiGLU", "d_hidden=0");
}

BOOST_AUTO_TEST_CASE(rotary_embedding_passes_check_layer_at_an_offset) {
  RotaryEmbedding rope(rotary(6, 20, 50.0));
  for (const int64_t offset : {int64_t{0}, int64_t{7}}) {
    const LayerCheckReport r =
        check_layer(rope, [offset](RotaryEmbedding& m, const std::vector<Variable>& in) { return m(in[0], offset); },
                    {randn_leaf({2, 4, 3, 6}, 4, "x")}, checked_with(nullptr));
    BOOST_TEST(r.ok, r.table());
  }
  BOOST_TEST(rope.state_dict().empty());
  AG_CHECK_THROWS_WITH(rope(Variable(zeros({1, 4, 3, 6})), 17), std::invalid_argument, "RotaryEmbedding", "position 20",
                       "max_positions=20");
  AG_CHECK_THROWS_WITH(RotaryEmbedding(rotary(5, 4, 10000.0)), std::invalid_argument,
                       "head_dim=5");
}

// Llama 3's scaling with Llama 3.1's numbers (theta 500000, factor 8, low 1, high 4, original
// context 8192, head_dim 128): waves shorter than 2048 positions keep their frequency, those
// longer than 8192 are slowed 8 times, and the ones between move smoothly from one to the other.
BOOST_AUTO_TEST_CASE(llama3_scaling_keeps_fast_waves_and_slows_long_ones) {
  const RotaryOptions plain = rotary(128, 16, 500000.0);
  RotaryOptions scaled = plain;
  scaled.scaling.kind = RopeScaling::Kind::llama3;
  const std::vector<double> f = rotary_inverse_frequencies(plain), g = rotary_inverse_frequencies(scaled);
  BOOST_REQUIRE_EQUAL(f.size(), 64u);
  int kept = 0, slowed = 0, blended = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const double wavelength = 2 * std::numbers::pi / f[i];
    BOOST_TEST_CONTEXT("pair " << i << " wavelength " << wavelength) {
      BOOST_TEST(std::abs(f[i] - std::pow(500000.0, -static_cast<double>(2 * i) / 128.0)) <= 1e-15 * f[i]);
      if (wavelength < 2048) {
        BOOST_TEST(g[i] == f[i]);
        ++kept;
      } else if (wavelength > 8192) {
        BOOST_TEST(std::abs(g[i] - f[i] / 8) <= 1e-15 * f[i]);
        ++slowed;
      } else {
        BOOST_TEST((g[i] < f[i] && g[i] > f[i] / 8));
        ++blended;
      }
    }
  }
  BOOST_TEST(kept > 0);
  BOOST_TEST(slowed > 0);
  BOOST_TEST(blended > 0);
  scaled.scaling.high_freq_factor = 0.5;
  AG_CHECK_THROWS_WITH(rotary_inverse_frequencies(scaled), std::invalid_argument, "llama3", "high_freq_factor=0.5");
}

struct AttentionCase {
  const char* what;
  int64_t n_head, n_kv_head;
  bool qkv_bias, qk_norm;
  double dropout;
};

BOOST_AUTO_TEST_CASE(grouped_query_attention_passes_check_layer) {
  const std::vector<AttentionCase> cases = {
      {"Llama: 4 query heads over 2", 4, 2, false, false, 0.0},
      {"multi-query: 4 over 1", 4, 1, false, false, 0.0},
      {"multi-head: 2 over 2", 2, 2, false, false, 0.0},
      {"Qwen2: q/k/v biases", 4, 2, true, false, 0.0},
      {"Qwen3: q/k norms", 4, 2, false, true, 0.0},
      {"dropout on the weights", 4, 2, false, false, 0.2},
  };
  uint64_t seed = 10;
  for (const AttentionCase& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      GroupedQueryAttentionOptions o = attention(c.n_head, c.n_kv_head);
      o.qkv_bias = c.qkv_bias;
      o.qk_norm = c.qk_norm;
      o.dropout = c.dropout;
      manual_seed(++seed);
      GroupedQueryAttention attn(o);
      const AttentionMask mask = AttentionMask::causal(5) & AttentionMask::key_padding({5, 3}, 5);
      const LayerCheckReport r = check_layer(
          attn, [mask](GroupedQueryAttention& m, const std::vector<Variable>& in) { return m(in[0], mask); },
          {randn_leaf({2, 5, 8}, ++seed, "x")}, checked_with([o] { return std::make_unique<GroupedQueryAttention>(o); }));
      // Unlike MultiHeadAttention's, the key bias does get a gradient: the rotation turns it
      // differently at each key position, so softmax does not cancel it (no zero_ok needed).
      BOOST_TEST(r.ok, r.table());
      BOOST_TEST(entry_shape(attn, "k_proj.weight") == (Shape{c.n_kv_head * 4, 8}));
      BOOST_TEST(entries(attn, "q_proj.bias") == (c.qkv_bias ? 1u : 0u));
      BOOST_TEST(entries(attn, "o_proj.bias") == 0u);
      BOOST_TEST(entries(attn, "q_norm.weight") == (c.qk_norm ? 1u : 0u));
    }
  }
}

// Decoding a sequence in pieces through the cache gives the rows of one forward over all of it:
// 3 positions, then 1, then 2 (the rotation's offset and the keys' reuse both matter).
BOOST_AUTO_TEST_CASE(grouped_query_attention_and_block_decode_through_the_cache) {
  manual_seed(20);
  GroupedQueryAttentionOptions o = attention(4, 2);
  o.qk_norm = true;
  LlamaBlockOptions bo;
  bo.attention = o;
  bo.d_hidden = 12;
  LlamaBlock block(bo);
  block.to(DType::f64);
  block.eval();
  const Variable x(randn({2, 6, 8}, 21));
  NoGradGuard no_grad;
  const Tensor whole = block(x, AttentionMask::causal(6)).value();
  KvCache cache(KvCacheOptions{.n_layers = 1, .batch = 2, .n_head = 2, .d_k = 4, .max_len = 6, .dtype = DType::f64});
  int64_t at = 0;
  for (const int64_t step : {int64_t{3}, int64_t{1}, int64_t{2}}) {
    const AttentionMask mask = cache.causal_mask(0, step);
    const Tensor part = block(Variable(x.value().narrow(1, at, step)), mask, cache.layer(0)).value();
    BOOST_TEST(max_abs_diff(part, whole.narrow(1, at, step)) < 1e-12, "positions " << at << " .. " << at + step - 1);
    at += step;
  }
  BOOST_TEST(cache.length() == 6);
  BOOST_TEST(cache.keys(0).shape() == (Shape{2, 2, 6, 4}));  // key/value heads, not query heads
  // No room, or a cache of the query heads' shape, is refused before anything is appended.
  AG_CHECK_THROWS_WITH(block(Variable(x.value().narrow(1, 0, 1)), {}, cache.layer(0)), std::invalid_argument,
                       "GroupedQueryAttention", "holds 6", "max_len=6");
  KvCache wrong(KvCacheOptions{.n_layers = 1, .batch = 2, .n_head = 4, .d_k = 4, .max_len = 6, .dtype = DType::f64});
  AG_CHECK_THROWS_WITH(block(Variable(x.value().narrow(1, 0, 1)), {}, wrong.layer(0)), std::invalid_argument,
                       "GroupedQueryAttention", "H=4", "n_kv_head=2");
  BOOST_TEST(wrong.length(0) == 0);
}

BOOST_AUTO_TEST_CASE(grouped_query_attention_refuses_a_cache_with_grad_on_and_bad_options) {
  GroupedQueryAttention attn(attention(4, 2));
  KvCache cache(KvCacheOptions{.n_layers = 1, .batch = 1, .n_head = 2, .d_k = 4, .max_len = 4});
  AG_CHECK_THROWS_WITH(attn(Variable(zeros({1, 1, 8})), {}, cache.layer(0)), std::logic_error, "NoGradGuard");
  AG_CHECK_THROWS_WITH(GroupedQueryAttention(attention(4, 3)), std::invalid_argument, "n_head=4", "n_kv_head=3");
  GroupedQueryAttentionOptions odd = attention(4, 2);
  odd.head_dim = 3;
  AG_CHECK_THROWS_WITH(GroupedQueryAttention{odd}, std::invalid_argument, "head_dim=3");
  AG_CHECK_THROWS_WITH(attn(Variable(zeros({1, 3, 6}))), std::invalid_argument, "GroupedQueryAttention", "(1, 3, 6)");
}

BOOST_AUTO_TEST_CASE(llama_block_passes_check_layer) {
  for (const bool qkv_bias : {false, true}) {
    BOOST_TEST_CONTEXT("qkv_bias " << qkv_bias) {
      GroupedQueryAttentionOptions a = attention(4, 2);
      a.qkv_bias = qkv_bias;
      LlamaBlockOptions o;
      o.attention = a;
      o.d_hidden = 12;
      o.norm_eps = 1e-5;
      manual_seed(30);
      LlamaBlock block(o);
      const LayerCheckReport r = check_layer(
          block, [](LlamaBlock& m, const std::vector<Variable>& in) { return m(in[0], AttentionMask::causal(4)); },
          {randn_leaf({2, 4, 8}, 31, "x")},
          checked_with([o] { return std::make_unique<LlamaBlock>(o); }));
      BOOST_TEST(r.ok, r.table());
      BOOST_TEST(entries(block, "self_attn.q_proj.weight") == 1u);
      BOOST_TEST(entries(block, "post_attention_layernorm.weight") == 1u);
      BOOST_TEST(entries(block, "mlp.up_proj.weight") == 1u);
      BOOST_TEST(block.parameters().size() == (qkv_bias ? 12u : 9u));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
