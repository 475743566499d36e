// PositionwiseFeedForward, TransformerBlock (pre- and post-norm) and TransformerEncoder: each
// equal to its formula written from its children, f64 gradient checks in train and eval with
// masks, fully masked rows, and the hand-written flavours (b) and (c) of issue 3. A user's
// own layers in the blocks' slots are tested in test_sublayers.cpp.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layer_support.h"

namespace ag::testing {
namespace {

// The block when the attention branch contributes nothing (a query that sees no key).
Variable block_without_attention(TransformerBlock& block, const Variable& x) {
  if (block.options().norm_first) return x + block.ff()(block.norm2()(x));
  const Variable h = block.norm1()(x);
  return block.norm2()(h + block.ff()(h));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(feed_forward)

BOOST_AUTO_TEST_CASE(is_linear_activation_linear) {
  for (const Activation act : {Activation::relu, Activation::gelu}) {
    manual_seed(1);
    PositionwiseFeedForward ff({.d_model = 4, .d_hidden = 6, .activation = act});
    ff.eval();
    ff.to(DType::f64);
    BOOST_TEST(ff.named_parameters()[0].first == "linear1.weight");
    BOOST_TEST(ff.linear1().weight().shape() == (Shape{6, 4}));
    BOOST_TEST(ff.linear2().weight().shape() == (Shape{4, 6}));
    const Variable x(randn({2, 3, 4}, 2));
    const Variable expected = ff.linear2()(apply_activation(act, ff.linear1()(x)));
    BOOST_TEST(max_abs_diff(ff(x).value(), expected.value()) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_train_with_dropout_and_eval) {
  for (const Activation act : {Activation::relu, Activation::gelu}) {
    for (const bool training : {true, false}) {
      manual_seed(3);
      PositionwiseFeedForward ff({.d_model = 4, .d_hidden = 6, .activation = act, .dropout = 0.3});
      ff.train(training);
      const Variable x = randn_leaf({2, 3, 4}, 4, "x");
      check_module_gradients(ff, [&](const std::vector<Variable>& in) { return ff(in[0]); }, {x});
    }
  }
  // A transposed input.
  PositionwiseFeedForward ff({.d_model = 3, .d_hidden = 5, .dropout = 0.0, .bias = false});
  BOOST_TEST(ff.named_parameters().size() == 2u);
  const Variable xt = randn_leaf({2, 3, 4}, 5, "xt");
  check_module_gradients(ff, [&](const std::vector<Variable>& in) { return ff(transpose(in[0], 1, 2)); }, {xt});
  AG_CHECK_THROWS_WITH(ff(Variable(zeros({2, 5}, DType::f64))), std::invalid_argument, "PositionwiseFeedForward",
                       "(2, 5)", "d_model=3");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(transformer_block)

BOOST_AUTO_TEST_CASE(pre_and_post_norm_equal_their_formulas) {
  for (const bool norm_first : {false, true}) {
    manual_seed(10);
    TransformerBlock block(small_block(norm_first));
    block.eval();
    block.to(DType::f64);
    const Variable x(randn({2, 4, 8}, 11));
    const AttentionMask mask = AttentionMask::causal(4) & AttentionMask::key_padding({4, 2}, 4);
    BOOST_TEST(max_abs_diff(block(x, mask).value(), block_formula(block, x, mask).value()) < 1e-12);
    // The mask reaches the attention: without it the output changes.
    BOOST_TEST(max_abs_diff(block(x, mask).value(), block(x).value()) > 1e-3);
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_pre_and_post_norm_train_and_eval_with_masks) {
  for (const bool norm_first : {false, true}) {
    for (const bool training : {true, false}) {
      manual_seed(12);
      TransformerBlock block(small_block(norm_first, 0.15));
      block.train(training);
      const AttentionMask mask = AttentionMask::causal(3) & AttentionMask::key_padding({3, 2}, 3);
      const Variable x = randn_leaf({2, 3, 8}, 13, "x");
      check_module_gradients(block, [&](const std::vector<Variable>& in) { return block(in[0], mask); }, {x},
                             {block.attn().w_k().bias()});
    }
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_with_a_trained_attention_bias) {
  manual_seed(14);
  TransformerBlock block(small_block(true, 0.0));
  const Variable x = randn_leaf({1, 3, 8}, 15, "x"), bias = randn_leaf({2, 3, 3}, 16, "bias");
  check_module_gradients(block, [&](const std::vector<Variable>& in) { return block(in[0], {}, AttentionBias(in[1])); },
                         {x, bias}, {block.attn().w_k().bias()});
}

BOOST_AUTO_TEST_CASE(fully_masked_rows_keep_only_the_residual_path) {
  for (const bool norm_first : {false, true}) {
    for (const bool training : {true, false}) {
      manual_seed(20);
      TransformerBlock block(small_block(norm_first, 0.2));
      block.to(DType::f64);
      const AttentionMask mask = AttentionMask::key_padding({3, 0}, 3);  // batch 1 sees no key
      const Variable x = randn_leaf({2, 3, 8}, 21, "x");
      block.eval();
      const Tensor expected = block_without_attention(block, x).value().select(0, 1);
      block.train(training);
      const GeneratorState start = default_generator().state();
      const Variable y = block(x, mask);
      if (!training) BOOST_TEST(max_abs_diff(y.value().select(0, 1), expected) < 1e-12);
      y.backward(randn({2, 3, 8}, 22));
      BOOST_TEST(all_finite(x.grad()));
      BOOST_TEST(finite_parameter_grads(block) > 0);
      // Each position of batch 1 now depends only on itself: changing the others leaves it alone.
      Variable x2(x.value().clone());
      x2.mutable_value().select(0, 1).select(0, 0).fill_(3.0);
      default_generator().set_state(start);
      const Tensor y2 = block(x2, mask).value();
      BOOST_TEST(max_abs_diff(y2.select(0, 1).narrow(0, 1, 2), y.value().select(0, 1).narrow(0, 1, 2)) == 0.0);
      check_module_gradients(block, [&](const std::vector<Variable>& in) { return block(in[0], mask); }, {x},
                             {block.attn().w_k().bias()});
    }
  }
}

// Flavour (c): attention with temperature sqrt(d_k) and dropout on the weights, residual then
// LayerNorm (post-norm), a ReLU feed-forward with its own residual and LayerNorm, projections
// without bias.
BOOST_AUTO_TEST_CASE(flavour_c_post_norm_temperature_no_projection_bias) {
  const TransformerBlockOptions options{.d_model = 8, .n_head = 2, .d_ff = 12, .dropout = 0.1,
                                        .attn_dropout = 0.1, .activation = Activation::relu, .norm_first = false,
                                        .attn_bias = false, .temperature = 2.0};  // sqrt(d_k) with d_k = 4
  manual_seed(30);
  TransformerBlock block(options);
  BOOST_TEST(block.attn().options().bias == false);
  BOOST_TEST(block.attn().attention().scale_for(4) == 0.5);
  BOOST_TEST(block.attn().attention().options().dropout == 0.1);
  for (const auto& [name, p] : block.named_parameters()) {
    if (name.rfind("attn.", 0) == 0) BOOST_TEST(name.find("bias") == std::string::npos, name);
  }
  BOOST_TEST(block.ff_as<PositionwiseFeedForward>().linear1().bias().defined());
  // 4 * 8 * 8 + (12 * 8 + 12) + (8 * 12 + 8) + 2 * 16
  BOOST_TEST(block.num_parameters() == 256 + 108 + 104 + 32);
  block.eval();
  block.to(DType::f64);
  const Variable x = randn_leaf({2, 3, 8}, 31, "x");
  BOOST_TEST(max_abs_diff(block(x).value(), block_formula(block, x, {}).value()) < 1e-12);
  block.train();
  check_module_gradients(block, [&](const std::vector<Variable>& in) { return block(in[0]); }, {x});
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_block_and_shape) {
  TransformerBlock block(small_block(false));
  AG_CHECK_THROWS_WITH(block(Variable(zeros({2, 3, 6}))), std::invalid_argument, "TransformerBlock", "(2, 3, 6)",
                       "d_model=8");
  AG_CHECK_THROWS_WITH(TransformerBlock({.d_model = 8, .n_head = 3}), std::invalid_argument, "MultiHeadAttention");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(transformer_encoder)

BOOST_AUTO_TEST_CASE(stacks_blocks_and_adds_a_final_norm_for_pre_norm) {
  for (const bool norm_first : {false, true}) {
    manual_seed(40);
    TransformerEncoder enc({.n_layers = 3, .block = small_block(norm_first)});
    BOOST_TEST(enc.size() == 3u);
    enc.eval();
    enc.to(DType::f64);
    const Variable x(randn({2, 4, 8}, 41));
    const AttentionMask mask = AttentionMask::key_padding({4, 3}, 4);
    Variable expected = x;
    for (size_t i = 0; i < enc.size(); ++i) expected = enc.block(i)(expected, mask);
    if (norm_first) expected = enc.norm()(expected);
    else AG_CHECK_THROWS_WITH(enc.norm(), std::logic_error, "norm_first");
    BOOST_TEST(max_abs_diff(enc(x, mask).value(), expected.value()) < 1e-12);
  }
  AG_CHECK_THROWS_WITH(TransformerEncoder({.n_layers = 0, .block = small_block(true)}), std::invalid_argument,
                       "TransformerEncoder", "n_layers");
}

BOOST_AUTO_TEST_CASE(gradcheck_pre_norm_train_and_post_norm_eval) {
  for (const bool norm_first : {true, false}) {
    manual_seed(42);
    TransformerEncoder enc({.n_layers = 2, .block = small_block(norm_first, 0.1)});
    enc.train(norm_first);
    const AttentionMask mask = AttentionMask::causal(3) & AttentionMask::key_padding({3, 1}, 3);
    const Variable x = randn_leaf({2, 3, 8}, 43, "x");
    check_module_gradients(enc, [&](const std::vector<Variable>& in) { return enc(in[0], mask); }, {x},
                           {enc.block(0).attn().w_k().bias(), enc.block(1).attn().w_k().bias()});
  }
}

BOOST_AUTO_TEST_CASE(fully_masked_rows_stay_finite_through_the_stack) {
  manual_seed(44);
  TransformerEncoder enc({.n_layers = 2, .block = small_block(true, 0.1)});
  const Variable x(randn({2, 3, 8}, 45, DType::f32), true);
  const Variable y = enc(x, AttentionMask::key_padding({2, 0}, 3));
  BOOST_TEST(all_finite(y.value()));
  sum(y * y).backward();
  BOOST_TEST(all_finite(x.grad()));
  BOOST_TEST(finite_parameter_grads(enc) == static_cast<int>(enc.parameters().size()));
}

BOOST_AUTO_TEST_SUITE_END()


BOOST_AUTO_TEST_SUITE(flavour_b_causal_self_attention)

// Flavour (b): causal self-attention over a (128, 64, 512) batch with 8 heads, in f32.
BOOST_AUTO_TEST_CASE(full_size_forward_backward_is_causal) {
  manual_seed(50);
  const int64_t B = 128, T = 64, C = 512, cut = 40;
  MultiHeadAttention mha({.d_model = C, .n_head = 8});
  const AttentionMask mask = AttentionMask::causal(T);
  const Variable x(randn({B, T, C}, 51, DType::f32), true);
  const AttentionOutput r = mha.forward(x, mask, {}, /*need_weights=*/true);
  BOOST_REQUIRE(r.output.shape() == (Shape{B, T, C}));
  BOOST_REQUIRE(r.weights.shape() == (Shape{B, 8, T, T}));
  // Weights: zero above the diagonal, rows summing to one.
  const float* w = r.weights.data<float>();
  int64_t above = 0;
  double worst_sum = 0;
  for (int64_t row = 0; row < B * 8 * T; ++row) {
    const int64_t q = row % T;
    double total = 0;
    for (int64_t k = 0; k < T; ++k) {
      const float v = w[row * T + k];
      if (k > q && v != 0.0f) ++above;
      total += v;
    }
    worst_sum = std::max(worst_sum, std::abs(total - 1.0));
  }
  BOOST_TEST(above == 0);
  BOOST_TEST(worst_sum < 1e-5);
  // Backward: a loss on the positions before `cut` sends nothing to the positions after it.
  sum(narrow(r.output, 1, 0, cut)).backward();
  BOOST_TEST(all_finite(x.grad()));
  BOOST_TEST(max_abs_diff(x.grad().narrow(1, cut, T - cut), zeros({B, T - cut, C})) == 0.0);
  BOOST_TEST(max_abs_diff(x.grad().narrow(1, 0, cut), zeros({B, cut, C})) > 0.0);
  BOOST_TEST(finite_parameter_grads(mha) == 8);
  // Forward: changing the inputs after `cut` leaves the outputs before it unchanged.
  Tensor changed = x.value().clone();
  changed.narrow(1, cut, T - cut).copy_(randn({B, T - cut, C}, 52, DType::f32));
  NoGradGuard no_grad;
  const Tensor y2 = mha.forward(Variable(changed), mask).output.value();
  BOOST_TEST(max_abs_diff(y2.narrow(1, 0, cut), r.output.value().narrow(1, 0, cut)) < 1e-6);
  BOOST_TEST(max_abs_diff(y2.narrow(1, cut, T - cut), r.output.value().narrow(1, cut, T - cut)) > 1e-3);
}

BOOST_AUTO_TEST_CASE(scaled_down_copy_gradchecks_in_f64) {
  manual_seed(53);
  MultiHeadAttention mha({.d_model = 16, .n_head = 8});  // 8 heads of 2
  const AttentionMask mask = AttentionMask::causal(5);
  const Variable x = randn_leaf({2, 5, 16}, 54, "x");
  check_module_gradients(mha, [&](const std::vector<Variable>& in) { return mha.forward(in[0], mask).output; }, {x},
                         {mha.w_k().bias()});
  // The same configuration inside a causal pre-norm block.
  manual_seed(55);
  TransformerBlock block({.d_model = 16, .n_head = 8, .d_ff = 8, .dropout = 0.1, .norm_first = true});
  check_module_gradients(block, [&](const std::vector<Variable>& in) { return block(in[0], mask); }, {x},
                         {block.attn().w_k().bias()});
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
