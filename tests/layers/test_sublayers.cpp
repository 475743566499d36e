// A user's own layers in the transformer blocks' slots: a SwiGLU feed-forward and an RMSNorm,
// written here from public headers only, fill the ff and norm slots of TransformerBlock and
// TransformerEncoder (names, f64 check_layer, KV-cached decoding, default layers unchanged, and
// the errors for bad factories).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layer_support.h"

namespace ag::testing {
namespace {

// ---- a user's layers, written from public headers only ----

// SwiGLU feed-forward (Shazeer, 2020): w_down(silu(w_gate x) * w_up x), without biases.
//   x: (..., d_model) -> same shape; w_gate, w_up: (d_hidden, d_model), w_down: (d_model, d_hidden)
class SwiGLU : public Sublayer {
 public:
  SwiGLU(int64_t d_model, int64_t d_hidden)
      : w_gate_(register_module("w_gate", std::make_unique<Linear>(d_model, d_hidden, false))),
        w_up_(register_module("w_up", std::make_unique<Linear>(d_model, d_hidden, false))),
        w_down_(register_module("w_down", std::make_unique<Linear>(d_hidden, d_model, false))) {}
  Variable forward(const Variable& x) override {
    const Variable gate = w_gate_(x);
    return w_down_(gate * sigmoid(gate) * w_up_(x));
  }
  std::string name() const override { return "SwiGLU"; }

 private:
  Linear& w_gate_;
  Linear& w_up_;
  Linear& w_down_;
};

// RMSNorm composed from differentiable ops: x / sqrt(mean(x^2 over the last axis) + eps) * weight.
//   x: (..., features) -> same shape; weight: (features), ones
class RMSNorm : public Sublayer {
 public:
  explicit RMSNorm(int64_t features, double eps = 1e-6)
      : eps_(eps), weight_(register_parameter("weight", ones({features}))) {}
  Variable forward(const Variable& x) override {
    require_dtype(x, weight_.dtype(), "input");
    return x / sqrt(mean(x * x, {-1}, true) + eps_) * weight_;
  }
  std::string name() const override { return "RMSNorm"; }

 private:
  double eps_;
  Variable& weight_;
};

// Breaks the Sublayer contract: (..., d) -> (..., 1), which a residual sum would broadcast
// silently if nobody checked.
class RowMean : public Sublayer {
 public:
  Variable forward(const Variable& x) override { return mean(x, {-1}, true); }
  std::string name() const override { return "RowMean"; }
};

std::unique_ptr<Sublayer> make_swiglu(const TransformerBlockOptions& b) {
  return std::make_unique<SwiGLU>(b.d_model, b.d_ff);
}
std::unique_ptr<Sublayer> make_rms_norm(const TransformerBlockOptions& b) {
  return std::make_unique<RMSNorm>(b.d_model);
}

TransformerBlockOptions user_block(bool norm_first, double dropout = 0.1) {
  TransformerBlockOptions o = small_block(norm_first, dropout);
  o.make_ff = make_swiglu;
  o.make_norm = make_rms_norm;
  return o;
}

std::vector<std::string> state_names(const Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : m.state_dict()) names.push_back(name);
  return names;
}

LayerCheckOptions block_check_options(std::function<std::unique_ptr<Module>()> make_twin) {
  LayerCheckOptions o;
  o.make_twin = std::move(make_twin);
  o.zero_ok = {"w_k.bias"};  // softmax cancels the key bias's gradient
  o.log = nullptr;           // the table goes into the assertion's message instead
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(user_sublayers)

BOOST_AUTO_TEST_CASE(user_layers_fill_the_slots_under_the_slot_names) {
  for (const bool norm_first : {false, true}) {
    BOOST_TEST_CONTEXT("norm_first " << norm_first) {
      manual_seed(60);
      TransformerBlock plain(small_block(norm_first));
      manual_seed(60);
      TransformerBlock block(user_block(norm_first));
      // attn is built first, so the factories leave its initial values alone.
      std::vector<std::string> expected;
      for (const auto& [name, p] : plain.named_parameters()) {
        if (name.rfind("attn.", 0) != 0) continue;
        expected.push_back(name);
        BOOST_TEST(max_abs_diff(p.value(), block.state_dict()[expected.size() - 1].second) == 0.0, name);
      }
      BOOST_REQUIRE(expected.size() == 8u);
      for (const char* name :
           {"ff.w_gate.weight", "ff.w_up.weight", "ff.w_down.weight", "norm1.weight", "norm2.weight"}) {
        expected.push_back(name);
      }
      BOOST_TEST(state_names(block) == expected, boost::test_tools::per_element());
      // The factory read d_ff from the block's options.
      BOOST_TEST(block.ff_as<SwiGLU>().named_parameters()[0].second.shape() == (Shape{12, 8}));
      BOOST_TEST(block.ff().name() == "SwiGLU");
      BOOST_TEST(block.norm1().name() == "RMSNorm");
      BOOST_TEST(block.norm2().name() == "RMSNorm");
      BOOST_TEST((&block.norm1_as<RMSNorm>() != &block.norm2_as<RMSNorm>()));  // one layer per slot
      // The forward runs through the user's layers: equal to the formula written from the
      // slots, and different from the default block built from the same seed.
      for (TransformerBlock* b : {&plain, &block}) {
        b->eval();
        b->to(DType::f64);
      }
      const Variable x(randn({2, 4, 8}, 61));
      const AttentionMask mask = AttentionMask::causal(4);
      const Tensor y = block(x, mask).value();
      BOOST_TEST(max_abs_diff(y, block_formula(block, x, mask).value()) < 1e-12);
      BOOST_TEST(max_abs_diff(y, plain(x, mask).value()) > 1e-3);
    }
  }
}

BOOST_AUTO_TEST_CASE(encoders_call_the_factories_for_every_block_and_the_final_norm) {
  for (const bool norm_first : {true, false}) {
    BOOST_TEST_CONTEXT("norm_first " << norm_first) {
      int ff_calls = 0, norm_calls = 0;
      TransformerEncoderOptions o{.n_layers = 2, .block = small_block(norm_first)};
      o.block.make_ff = [&ff_calls](const TransformerBlockOptions& b) {
        ++ff_calls;
        return make_swiglu(b);
      };
      o.block.make_norm = [&norm_calls](const TransformerBlockOptions& b) {
        ++norm_calls;
        return make_rms_norm(b);
      };
      manual_seed(62);
      TransformerEncoder enc(o);
      BOOST_TEST(ff_calls == 2);
      BOOST_TEST(norm_calls == (norm_first ? 5 : 4));
      const std::vector<std::string> names = state_names(enc);
      std::vector<std::string> outside_attn;
      for (const std::string& name : names) {
        if (name.find(".attn.") == std::string::npos) outside_attn.push_back(name);
      }
      std::vector<std::string> expected;
      for (const char* block : {"blocks.0.", "blocks.1."}) {
        for (const char* name : {"ff.w_gate.weight", "ff.w_up.weight", "ff.w_down.weight", "norm1.weight",
                                 "norm2.weight"}) {
          expected.push_back(std::string(block) + name);
        }
      }
      if (norm_first) expected.push_back("norm.weight");
      BOOST_TEST(outside_attn == expected, boost::test_tools::per_element());
      if (norm_first) {
        BOOST_TEST(enc.norm().name() == "RMSNorm");
        BOOST_TEST(enc.norm_as<RMSNorm>().num_parameters() == 8);
      }
      BOOST_TEST(enc.block(1).ff().name() == "SwiGLU");
    }
  }
}

BOOST_AUTO_TEST_CASE(check_layer_passes_on_blocks_with_user_layers) {
  for (const bool norm_first : {false, true}) {
    BOOST_TEST_CONTEXT("norm_first " << norm_first) {
      manual_seed(63);
      const TransformerBlockOptions o = user_block(norm_first, 0.1);
      TransformerBlock block(o);
      const AttentionMask mask = AttentionMask::causal(3) & AttentionMask::key_padding({3, 2}, 3);
      const auto forward = [mask](TransformerBlock& m, const std::vector<Variable>& in) { return m(in[0], mask); };
      const LayerCheckReport r =
          check_layer(block, forward, {randn_leaf({2, 3, 8}, 64, "x")},
                      block_check_options([o] { return std::make_unique<TransformerBlock>(o); }));
      BOOST_TEST(r.ok, r.table());
      // Nothing skipped: dropout is on, so the eval gradient row ran too.
      BOOST_TEST(r.checked() == static_cast<int>(r.rows.size()), r.table());
      BOOST_TEST(block.parameters().size() == 13u);
    }
  }
}

BOOST_AUTO_TEST_CASE(check_layer_passes_on_encoders_with_user_layers) {
  for (const bool norm_first : {true, false}) {
    BOOST_TEST_CONTEXT("norm_first " << norm_first) {
      manual_seed(65);
      const TransformerEncoderOptions o{.n_layers = 2, .block = user_block(norm_first, 0.1)};
      TransformerEncoder enc(o);
      const auto forward = [](TransformerEncoder& m, const std::vector<Variable>& in) {
        return m(in[0], AttentionMask::causal(3));
      };
      const LayerCheckReport r =
          check_layer(enc, forward, {randn_leaf({2, 3, 8}, 66, "x")},
                      block_check_options([o] { return std::make_unique<TransformerEncoder>(o); }));
      BOOST_TEST(r.ok, r.table());
      BOOST_TEST(enc.parameters().size() == (norm_first ? 27u : 26u));
    }
  }
}

// Factories that build exactly the default layers give the default block, bit for bit: the
// default path places its layers where a factory's go, and its names stay PyTorch's.
BOOST_AUTO_TEST_CASE(default_layers_are_unchanged_bit_for_bit) {
  for (const bool norm_first : {false, true}) {
    BOOST_TEST_CONTEXT("norm_first " << norm_first) {
      const TransformerBlockOptions plain_options = small_block(norm_first, 0.2);
      TransformerBlockOptions built_options = plain_options;
      built_options.make_ff = [](const TransformerBlockOptions& b) {
        return std::make_unique<PositionwiseFeedForward>(
            PositionwiseFeedForwardOptions{b.d_model, b.d_ff, b.activation, b.dropout, b.ff_bias});
      };
      built_options.make_norm = [](const TransformerBlockOptions& b) {
        return std::make_unique<LayerNorm>(b.d_model, b.layer_norm_eps);
      };
      manual_seed(67);
      TransformerBlock plain(plain_options);
      manual_seed(67);
      TransformerBlock built(built_options);
      const std::vector<std::string> names = state_names(plain);
      BOOST_REQUIRE(names.size() == 16u);
      const std::vector<std::string> tail(names.begin() + 8, names.end());
      const std::vector<std::string> torch_names = {"ff.linear1.weight", "ff.linear1.bias", "ff.linear2.weight",
                                                    "ff.linear2.bias",   "norm1.weight",    "norm1.bias",
                                                    "norm2.weight",      "norm2.bias"};
      BOOST_TEST(tail == torch_names, boost::test_tools::per_element());
      BOOST_TEST(state_names(built) == names, boost::test_tools::per_element());
      for (size_t i = 0; i < names.size(); ++i) {
        BOOST_TEST(max_abs_diff(plain.state_dict()[i].second, built.state_dict()[i].second) == 0.0, names[i]);
      }
      BOOST_TEST(plain.ff_as<PositionwiseFeedForward>().options().d_hidden == 12);
      BOOST_TEST(plain.norm1_as<LayerNorm>().options().eps == 1e-5);
      // Train mode, dropout on, one generator state: identical outputs and gradients.
      const Variable x(randn({2, 4, 8}, 68, DType::f32), true);
      const Variable x2(x.value().clone(), true);
      default_generator().set_step(5);
      const GeneratorState start = default_generator().state();
      const Variable y = plain(x, AttentionMask::causal(4));
      default_generator().set_state(start);
      const Variable y2 = built(x2, AttentionMask::causal(4));
      BOOST_TEST(max_abs_diff(y.value(), y2.value()) == 0.0);
      sum(y * y).backward();
      sum(y2 * y2).backward();
      BOOST_TEST(max_abs_diff(x.grad(), x2.grad()) == 0.0);
      const NamedVariables ps = plain.named_parameters(), bs = built.named_parameters();
      for (size_t i = 0; i < ps.size(); ++i) {
        BOOST_TEST(max_abs_diff(ps[i].second.grad(), bs[i].second.grad()) == 0.0, ps[i].first);
      }
      // Through the interface the default layers answer as through their own types.
      Sublayer& ff = plain.ff();
      const Variable h(randn({2, 4, 8}, 69, DType::f32));
      plain.eval();
      BOOST_TEST(max_abs_diff(ff(h).value(), plain.ff_as<PositionwiseFeedForward>()(h).value()) == 0.0);
    }
  }
}

BOOST_AUTO_TEST_CASE(cached_decoding_runs_through_user_layers) {
  for (const bool norm_first : {true, false}) {
    BOOST_TEST_CONTEXT("norm_first " << norm_first) {
      manual_seed(70);
      TransformerBlock block(user_block(norm_first, 0.2));
      block.to(DType::f64);
      block.eval();
      const Tensor x = randn({1, 5, 8}, 71);
      const Tensor full = block(Variable(x), AttentionMask::causal(5)).value();
      NoGradGuard no_grad;
      KvCache cache({.n_layers = 1, .batch = 1, .n_head = 2, .d_k = 4, .max_len = 5, .dtype = DType::f64});
      std::vector<Variable> steps;
      for (int64_t t = 0; t < 5; ++t) {
        steps.push_back(block(Variable(x.narrow(1, t, 1)), cache.causal_mask(0, 1), {}, cache.layer(0)));
      }
      BOOST_TEST(max_abs_diff(concat(steps, 1).value(), full) < 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_factories_and_shape_changing_layers_are_refused) {
  const auto null_layer = [](const TransformerBlockOptions&) { return std::unique_ptr<Sublayer>(); };
  const auto row_mean = [](const TransformerBlockOptions&) { return std::make_unique<RowMean>(); };
  TransformerBlockOptions no_ff = small_block(false);
  no_ff.make_ff = null_layer;
  AG_CHECK_THROWS_WITH(TransformerBlock{no_ff}, std::invalid_argument, "TransformerBlock(post-norm)", "slot ff",
                       "null", "d_model=8");
  TransformerBlockOptions no_norm = small_block(true);
  no_norm.make_norm = null_layer;
  AG_CHECK_THROWS_WITH(TransformerBlock{no_norm}, std::invalid_argument, "TransformerBlock(pre-norm)", "slot norm1",
                       "null");
  // Only the encoder's final norm (the fifth call) comes back null.
  int calls = 0;
  TransformerEncoderOptions enc_options{.n_layers = 2, .block = small_block(true)};
  enc_options.block.make_norm = [&calls](const TransformerBlockOptions& b) {
    return ++calls == 5 ? std::unique_ptr<Sublayer>() : make_rms_norm(b);
  };
  AG_CHECK_THROWS_WITH(TransformerEncoder{enc_options}, std::invalid_argument, "TransformerEncoder", "slot norm",
                       "null");

  // A layer whose output shape differs from its input: refused at forward time, naming the
  // block, the slot, the layer and both shapes.
  const Variable x(randn({2, 3, 8}, 72, DType::f32));
  TransformerBlockOptions mean_ff = small_block(false);
  mean_ff.make_ff = row_mean;
  TransformerBlock ff_block(mean_ff);
  AG_CHECK_THROWS_WITH(ff_block(x), std::logic_error, "TransformerBlock(post-norm), slot ff", "RowMean", "(2, 3, 8)",
                       "(2, 3, 1)");
  TransformerBlockOptions mean_norm = small_block(true);
  mean_norm.make_norm = row_mean;
  TransformerBlock norm_block(mean_norm);
  AG_CHECK_THROWS_WITH(norm_block(x), std::logic_error, "TransformerBlock(pre-norm), slot norm1", "RowMean", "(2, 3, 8)",
                       "(2, 3, 1)");
  calls = 0;
  enc_options.block.make_norm = [&calls](const TransformerBlockOptions& b) -> std::unique_ptr<Sublayer> {
    if (++calls == 5) return std::make_unique<RowMean>();
    return make_rms_norm(b);
  };
  TransformerEncoder enc(enc_options);
  AG_CHECK_THROWS_WITH(enc(x), std::logic_error, "TransformerEncoder, slot norm", "RowMean", "(2, 3, 8)", "(2, 3, 1)");
  // Called directly, the interface checks the shape too.
  RowMean rm;
  Sublayer& as_sublayer = rm;
  AG_CHECK_THROWS_WITH(as_sublayer(x), std::logic_error, "Sublayer", "RowMean", "(2, 3, 8)", "(2, 3, 1)");

  // Asking a slot for the wrong type names both types.
  TransformerBlock user(user_block(true));
  AG_CHECK_THROWS_WITH(user.ff_as<PositionwiseFeedForward>(), std::logic_error, "TransformerBlock(pre-norm)",
                       "slot ff", "SwiGLU", "PositionwiseFeedForward");
  AG_CHECK_THROWS_WITH(user.norm2_as<LayerNorm>(), std::logic_error, "slot norm2", "RMSNorm", "LayerNorm");
  TransformerBlock plain(small_block(true));
  AG_CHECK_THROWS_WITH(plain.ff_as<SwiGLU>(), std::logic_error, "slot ff", "PositionwiseFeedForward", "SwiGLU");
  AG_CHECK_THROWS_WITH(plain.norm1_as<RMSNorm>(), std::logic_error, "slot norm1", "LayerNorm", "RMSNorm");
  TransformerEncoder user_enc({.n_layers = 1, .block = user_block(true)});
  AG_CHECK_THROWS_WITH(user_enc.norm_as<LayerNorm>(), std::logic_error, "TransformerEncoder", "slot norm", "RMSNorm",
                       "LayerNorm");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
