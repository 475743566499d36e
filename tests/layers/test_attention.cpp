// ScaledDotProductAttention and MultiHeadAttention: the fused path against its composition
// from primitives, weights and masks, f64 gradient checks (masks, bias, dropout in train, eval,
// cross-attention with Tq != Tk and d_k != d_v), fully masked rows, the hand-written flavours
// (a), (d) and (e) of issue 3 as configurations, and the errors.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "layer_support.h"

namespace ag::testing {
namespace {

// Weights of each (b, h, q) row: sum to 1 over kept keys (or 0 when no key is kept), 0 elsewhere.
void check_weights_follow_mask(const Tensor& weights, const Tensor& keep4) {
  const Shape& s = weights.shape();
  const Tensor keep = keep4.to(weights.dtype()).expand(s).contiguous();
  for (int64_t b = 0; b < s[0]; ++b) {
    for (int64_t h = 0; h < s[1]; ++h) {
      for (int64_t q = 0; q < s[2]; ++q) {
        double total = 0, kept = 0;
        for (int64_t k = 0; k < s[3]; ++k) {
          const double w = weights.at({b, h, q, k});
          if (keep.at({b, h, q, k}) == 0.0) BOOST_TEST(w == 0.0);
          else total += w;
          kept += keep.at({b, h, q, k});
        }
        BOOST_TEST(std::abs(total - (kept > 0 ? 1.0 : 0.0)) < 1e-6);
      }
    }
  }
}

std::vector<Tensor> grads_of(const std::vector<Variable>& vars) {
  std::vector<Tensor> out;
  for (const Variable& v : vars) out.push_back(v.grad().defined() ? v.grad().clone() : Tensor());
  return out;
}

void clear(std::vector<Variable>& vars) {
  for (Variable& v : vars) v.zero_grad();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(scaled_dot_product_attention_layer)

BOOST_AUTO_TEST_CASE(fused_path_equals_composition_from_primitives) {
  // Batch 1 has no key at all: the fully masked rows must agree too (zero on both paths).
  const AttentionMask mask = AttentionMask::key_padding({4, 0}, 4) &
                             AttentionMask::keep(from_vector(std::vector<double>{1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 0},
                                                             {3, 4}));
  for (const double scale : {0.0, 0.7}) {
    ScaledDotProductAttention attn({.scale = scale});
    std::vector<Variable> vars{randn_leaf({2, 2, 3, 3}, 1, "q"), randn_leaf({2, 2, 4, 3}, 2, "k"),
                               randn_leaf({2, 2, 4, 5}, 3, "v"), randn_leaf({1, 2, 3, 4}, 4, "bias")};
    const AttentionOutput fused = attn(vars[0], vars[1], vars[2], mask, AttentionBias(vars[3]));
    const ComposedAttention ref = composed_attention(vars[0], vars[1], vars[2], mask.keep_tensor(), vars[3],
                                                     scale > 0 ? scale : 1.0 / std::sqrt(3.0));
    BOOST_TEST(max_abs_diff(fused.output.value(), ref.output.value()) < 1e-12);
    BOOST_TEST(max_abs_diff(fused.weights, ref.weights.value()) < 1e-12);
    const Tensor u = randn({2, 2, 3, 5}, 5);
    fused.output.backward(u);
    const std::vector<Tensor> g_fused = grads_of(vars);
    clear(vars);
    ref.output.backward(u);
    const std::vector<Tensor> g_ref = grads_of(vars);
    for (size_t i = 0; i < vars.size(); ++i) BOOST_TEST(max_abs_diff(g_fused[i], g_ref[i]) < 1e-12, vars[i].name());
  }
}

BOOST_AUTO_TEST_CASE(weights_sum_to_one_over_kept_keys_and_vanish_elsewhere) {
  ScaledDotProductAttention attn;
  const AttentionMask mask = AttentionMask::causal(5) & AttentionMask::key_padding({5, 3}, 5);
  const AttentionOutput r = attn(Variable(randn({2, 3, 5, 4}, 6)), Variable(randn({2, 3, 5, 4}, 7)),
                                 Variable(randn({2, 3, 5, 2}, 8)), mask);
  BOOST_REQUIRE(r.weights.shape() == (Shape{2, 3, 5, 5}));
  check_weights_follow_mask(r.weights, mask.keep_tensor());
  // Causal: nothing above the diagonal, and the first query sees only itself.
  for (int64_t q = 0; q < 5; ++q) {
    for (int64_t k = q + 1; k < 5; ++k) BOOST_TEST(r.weights.at({0, 1, q, k}) == 0.0);
  }
  BOOST_TEST(r.weights.at({0, 0, 0, 0}) == 1.0);
}

BOOST_AUTO_TEST_CASE(temperature_divides_and_scale_multiplies) {
  const Variable q(randn({1, 2, 3, 4}, 9)), k(randn({1, 2, 3, 4}, 10)), v(randn({1, 2, 3, 4}, 11));
  ScaledDotProductAttention by_temperature({.temperature = 2.0});
  ScaledDotProductAttention by_scale({.scale = 0.5});
  ScaledDotProductAttention by_default;
  BOOST_TEST(by_default.scale_for(4) == 0.5);
  BOOST_TEST(by_temperature.scale_for(4) == 0.5);
  BOOST_TEST(max_abs_diff(by_temperature(q, k, v).output.value(), by_scale(q, k, v).output.value()) == 0.0);
  ScaledDotProductAttention sharper({.temperature = 0.25});
  BOOST_TEST(max_abs_diff(sharper(q, k, v).output.value(),
                          composed_attention(q, k, v, Tensor(), Variable(), 4.0).output.value()) < 1e-12);
  AG_CHECK_THROWS_WITH(ScaledDotProductAttention({.scale = 1.0, .temperature = 2.0}), std::invalid_argument,
                       "ScaledDotProductAttention", "scale 1", "temperature 2");
  AG_CHECK_THROWS_WITH(ScaledDotProductAttention({.dropout = 1.5}), std::invalid_argument, "dropout 1.5");
}

BOOST_AUTO_TEST_CASE(gradcheck_masks_bias_dropout_train_and_eval) {
  manual_seed(12);
  ScaledDotProductAttention attn({.dropout = 0.3});
  const AttentionMask mask = AttentionMask::causal(3) & AttentionMask::key_padding({3, 2}, 3);
  // q arrives as a transposed view (non-contiguous), the bias broadcasts over the batch.
  const Variable qt = randn_leaf({2, 2, 4, 3}, 13, "q^T"), k = randn_leaf({2, 2, 3, 4}, 14, "k"),
                 v = randn_leaf({2, 2, 3, 2}, 15, "v"), bias = randn_leaf({2, 3, 3}, 16, "bias");
  const auto fn = [&](const std::vector<Variable>& in) {
    return attn(transpose(in[0], 2, 3), in[1], in[2], mask, AttentionBias(in[3])).output;
  };
  check_gradients(fn, {qt, k, v, bias});  // train: the same dropout mask in every evaluation
  attn.eval();
  check_gradients(fn, {qt, k, v, bias});
}

BOOST_AUTO_TEST_CASE(fully_masked_rows_give_zero_output_and_zero_finite_gradients) {
  for (const bool training : {true, false}) {
    manual_seed(17);
    ScaledDotProductAttention attn({.dropout = 0.2});
    attn.train(training);
    // Query 0 of batch 0 sees nothing; batch 1 sees nothing at all.
    Tensor keep = ones({2, 1, 3, 4});
    for (int64_t k = 0; k < 4; ++k) keep.set({0, 0, 0, k}, 0.0);
    for (int64_t q = 0; q < 3; ++q) {
      for (int64_t k = 0; k < 4; ++k) keep.set({1, 0, q, k}, 0.0);
    }
    const AttentionMask mask = AttentionMask::keep(keep);
    const Variable q = randn_leaf({2, 2, 3, 3}, 18), k = randn_leaf({2, 2, 4, 3}, 19), v = randn_leaf({2, 2, 4, 3}, 20);
    const AttentionOutput r = attn(q, k, v, mask);
    const Tensor out = r.output.value();
    for (int64_t h = 0; h < 2; ++h) {
      BOOST_TEST(max_abs_diff(out.select(0, 0).select(0, h).select(0, 0), zeros({3}, DType::f64)) == 0.0);
      BOOST_TEST(max_abs_diff(out.select(0, 1).select(0, h), zeros({3, 3}, DType::f64)) == 0.0);
    }
    BOOST_TEST(max_abs_diff(r.weights.select(0, 1), zeros({2, 3, 4}, DType::f64)) == 0.0);
    r.output.backward(randn({2, 2, 3, 3}, 21));
    for (const Variable& x : {q, k, v}) BOOST_TEST(all_finite(x.grad()));
    BOOST_TEST(max_abs_diff(q.grad().select(0, 1), zeros({2, 3, 3}, DType::f64)) == 0.0);
    BOOST_TEST(max_abs_diff(k.grad().select(0, 1), zeros({2, 4, 3}, DType::f64)) == 0.0);
    BOOST_TEST(max_abs_diff(v.grad().select(0, 1), zeros({2, 4, 3}, DType::f64)) == 0.0);
    BOOST_TEST(max_abs_diff(q.grad().select(0, 0).select(1, 0), zeros({2, 3}, DType::f64)) == 0.0);
    // The rows that do see keys still check out numerically.
    check_gradients([&](const std::vector<Variable>& in) { return attn(in[0], in[1], in[2], mask).output; },
                    {q, k, v});
  }
}

BOOST_AUTO_TEST_CASE(dropout_acts_on_the_weights_in_training_only) {
  manual_seed(22);
  const Variable q(randn({1, 1, 4, 3}, 23)), k(randn({1, 1, 6, 3}, 24)), v(randn({1, 1, 6, 3}, 25));
  ScaledDotProductAttention plain;
  ScaledDotProductAttention dropped({.dropout = 0.5});
  const Tensor reference = plain(q, k, v).output.value();
  const GeneratorState start = default_generator().state();
  const AttentionOutput train = dropped(q, k, v);
  BOOST_TEST(max_abs_diff(train.output.value(), reference) > 1e-3);
  BOOST_TEST(max_abs_diff(train.weights, plain(q, k, v).weights) < 1e-15);  // weights are reported before dropout
  default_generator().set_state(start);
  BOOST_TEST(max_abs_diff(dropped(q, k, v).output.value(), train.output.value()) == 0.0);  // replayable
  dropped.eval();
  BOOST_TEST(max_abs_diff(dropped(q, k, v).output.value(), reference) == 0.0);
}

BOOST_AUTO_TEST_CASE(bad_shapes_name_the_layer_and_every_shape) {
  ScaledDotProductAttention attn;
  const Variable q(zeros({1, 2, 3, 4})), k(zeros({1, 2, 5, 4})), v(zeros({1, 2, 5, 6}));
  AG_CHECK_THROWS_WITH(attn(q, k, Variable(zeros({1, 2, 4, 6}))), std::invalid_argument, "ScaledDotProductAttention",
                       "(1, 2, 3, 4)", "(1, 2, 5, 4)", "(1, 2, 4, 6)");
  AG_CHECK_THROWS_WITH(attn(Variable(zeros({2, 3, 4})), k, v), std::invalid_argument, "(2, 3, 4)");
  // The mask and bias are checked once, by the op the layer calls.
  AG_CHECK_THROWS_WITH(attn(q, k, v, AttentionMask::causal(3)), std::invalid_argument, "scaled_dot_product_attention",
                       "causal(3)", "(1, 1, 3, 3)", "(1, 2, 3, 5)", "q=(1, 2, 3, 4)");
  AG_CHECK_THROWS_WITH(attn(q, k, v, {}, AttentionBias(zeros({3, 4}))), std::invalid_argument, "bias", "(3, 4)",
                       "(1, 2, 3, 5)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(multi_head_attention)

BOOST_AUTO_TEST_CASE(parameters_are_named_and_sized_per_head) {
  MultiHeadAttention mha({.d_model = 8, .n_head = 2, .d_k = 3, .d_v = 5, .q_dim = 4, .k_dim = 6, .v_dim = 7});
  const NamedVariables p = mha.named_parameters();
  const std::vector<std::pair<std::string, Shape>> expected{
      {"w_q.weight", {6, 4}},  {"w_q.bias", {6}}, {"w_k.weight", {6, 6}},  {"w_k.bias", {6}},
      {"w_v.weight", {10, 7}}, {"w_v.bias", {10}}, {"w_o.weight", {8, 10}}, {"w_o.bias", {8}}};
  BOOST_REQUIRE(p.size() == expected.size());
  for (size_t i = 0; i < p.size(); ++i) {
    BOOST_TEST(p[i].first == expected[i].first);
    BOOST_TEST(p[i].second.shape() == expected[i].second, p[i].first);
  }
  // Defaults: d_k = d_v = d_model / n_head, inputs of size d_model.
  MultiHeadAttention plain({.d_model = 12, .n_head = 3});
  BOOST_TEST(plain.options().d_k == 4);
  BOOST_TEST(plain.options().d_v == 4);
  BOOST_TEST(plain.options().k_dim == 12);
  MultiHeadAttention no_bias({.d_model = 8, .n_head = 2, .bias = false});
  BOOST_TEST(no_bias.named_parameters().size() == 4u);
}

BOOST_AUTO_TEST_CASE(equals_projections_and_composed_attention) {
  manual_seed(30);
  MultiHeadAttention mha({.d_model = 6, .n_head = 2, .d_k = 4, .d_v = 3, .q_dim = 5, .k_dim = 7, .v_dim = 2});
  mha.to(DType::f64);
  const Variable query(randn({2, 3, 5}, 31)), key(randn({2, 4, 7}, 32)), value(randn({2, 4, 2}, 33));
  const AttentionMask mask = AttentionMask::key_padding({4, 2}, 4);
  const AttentionOutput r = mha.forward(query, key, value, mask, {}, /*need_weights=*/true);

  const auto project = [](Linear& lin, const Variable& x) {
    return matmul(x, transpose(lin.weight(), 0, 1)) + lin.bias();
  };
  const auto heads = [](const Variable& x, int64_t d) {  // (B, T, H*d) -> (B, H, T, d)
    return permute(reshape(x, {x.shape()[0], x.shape()[1], 2, d}), {0, 2, 1, 3});
  };
  const ComposedAttention ref =
      composed_attention(heads(project(mha.w_q(), query), 4), heads(project(mha.w_k(), key), 4),
                         heads(project(mha.w_v(), value), 3), mask.keep_tensor(), Variable(), 0.5);
  const Variable merged = reshape(permute(ref.output, {0, 2, 1, 3}), {2, 3, 6});
  BOOST_TEST(max_abs_diff(r.output.value(), project(mha.w_o(), merged).value()) < 1e-12);
  BOOST_REQUIRE(r.weights.shape() == (Shape{2, 2, 3, 4}));
  BOOST_TEST(max_abs_diff(r.weights, ref.weights.value()) < 1e-12);
  BOOST_TEST(!mha.forward(query, key, value, mask).weights.defined());  // only on request
}

// Flavour (a): self-attention with d_model / n_head, scores masked where a 0/1 mask is 0.
BOOST_AUTO_TEST_CASE(flavour_a_self_attention_with_a_keep_mask) {
  manual_seed(40);
  MultiHeadAttention mha({.d_model = 8, .n_head = 2});
  Tensor keep = from_vector(std::vector<double>{1, 0, 1, 0,  //
                                                0, 1, 0, 1,  //
                                                1, 1, 1, 0,  //
                                                0, 0, 1, 1},
                            {1, 1, 4, 4});
  const AttentionMask mask = AttentionMask::keep(keep);
  const AttentionOutput r = mha.forward(Variable(randn({3, 4, 8}, 41, DType::f32)), mask, {}, true);
  BOOST_REQUIRE(r.weights.shape() == (Shape{3, 2, 4, 4}));
  check_weights_follow_mask(r.weights, mask.keep_tensor());
  const Variable x = randn_leaf({2, 4, 8}, 42, "x");
  check_module_gradients(mha, [&](const std::vector<Variable>& in) { return mha.forward(in[0], mask).output; }, {x},
                         {mha.w_k().bias()});
}

// Flavour (d): separate d_k and d_v per head, returning the attention weights; cross-attention
// with Tq != Tk.
BOOST_AUTO_TEST_CASE(flavour_d_separate_dk_dv_with_weights) {
  manual_seed(50);
  MultiHeadAttention mha({.d_model = 6, .n_head = 3, .d_k = 2, .d_v = 4});
  const Variable query = randn_leaf({2, 3, 6}, 51, "query"), memory = randn_leaf({2, 5, 6}, 52, "memory");
  mha.to(DType::f64);
  const AttentionOutput r = mha.forward(query, memory, memory, {}, {}, true);
  BOOST_TEST(r.output.shape() == (Shape{2, 3, 6}));
  BOOST_TEST(r.weights.shape() == (Shape{2, 3, 3, 5}));
  check_weights_follow_mask(r.weights, ones({1, 1, 1, 1}));
  check_module_gradients(mha,
                         [&](const std::vector<Variable>& in) { return mha.forward(in[0], in[1], in[1]).output; },
                         {query, memory}, {mha.w_k().bias()});
}

// Flavour (e): query, key and value of sizes 64, 128 and 256 projected to 256 hidden units over
// 4 heads, with a key-padding mask, dropout and the bias switch.
BOOST_AUTO_TEST_CASE(flavour_e_mixed_input_sizes_full_size_in_f32) {
  for (const bool bias : {true, false}) {
    manual_seed(60);
    MultiHeadAttention mha(
        {.d_model = 256, .n_head = 4, .q_dim = 64, .k_dim = 128, .v_dim = 256, .bias = bias, .dropout = 0.1});
    BOOST_TEST(mha.num_parameters() == (bias ? 181248 : 180224));  // PyTorch's counts, see test_module.cpp
    const Variable query(randn({2, 5, 64}, 61, DType::f32), true), key(randn({2, 7, 128}, 62, DType::f32), true),
        value(randn({2, 7, 256}, 63, DType::f32), true);
    const AttentionMask mask = AttentionMask::key_padding({7, 4}, 7);
    const AttentionOutput r = mha.forward(query, key, value, mask, {}, true);
    BOOST_TEST(r.output.shape() == (Shape{2, 5, 256}));
    check_weights_follow_mask(r.weights, mask.keep_tensor());
    sum(r.output * r.output).backward();
    BOOST_TEST(finite_parameter_grads(mha) == (bias ? 8 : 4));
    for (const Variable& x : {query, key, value}) BOOST_TEST(all_finite(x.grad()));
    // Padded keys and values of batch 1 receive nothing.
    BOOST_TEST(max_abs_diff(key.grad().select(0, 1).narrow(0, 4, 3), zeros({3, 128})) == 0.0);
    BOOST_TEST(max_abs_diff(value.grad().select(0, 1).narrow(0, 4, 3), zeros({3, 256})) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(flavour_e_scaled_down_gradcheck) {
  for (const bool bias : {true, false}) {
    for (const bool training : {true, false}) {
      manual_seed(70);
      MultiHeadAttention mha(
          {.d_model = 8, .n_head = 4, .q_dim = 3, .k_dim = 5, .v_dim = 6, .bias = bias, .dropout = 0.2});
      mha.train(training);
      const AttentionMask mask = AttentionMask::key_padding({4, 2}, 4);
      const Variable query = randn_leaf({2, 3, 3}, 71, "query"), key = randn_leaf({2, 4, 5}, 72, "key"),
                     value = randn_leaf({2, 4, 6}, 73, "value");
      mha.to(DType::f64);
      std::vector<Variable> zero_ok;
      if (bias) zero_ok.push_back(mha.w_k().bias());
      check_module_gradients(
          mha, [&](const std::vector<Variable>& in) { return mha.forward(in[0], in[1], in[2], mask).output; },
          {query, key, value}, zero_ok);
    }
  }
}

BOOST_AUTO_TEST_CASE(fully_masked_rows_give_zero_output_even_with_bias) {
  for (const bool training : {true, false}) {
    manual_seed(80);
    MultiHeadAttention mha({.d_model = 4, .n_head = 2, .dropout = 0.25});
    mha.train(training);
    mha.to(DType::f64);
    const AttentionMask mask = AttentionMask::key_padding({3, 0}, 3);  // batch 1 has no keys
    const Variable x = randn_leaf({2, 3, 4}, 81, "x");
    const AttentionOutput r = mha.forward(x, mask);
    BOOST_TEST(max_abs_diff(r.output.value().select(0, 1), zeros({3, 4}, DType::f64)) == 0.0);
    BOOST_TEST(max_abs_diff(r.output.value().select(0, 0), zeros({3, 4}, DType::f64)) > 0.1);
    const Tensor u = randn({2, 3, 4}, 82);
    r.output.backward(u);
    BOOST_TEST(all_finite(x.grad()));
    BOOST_TEST(finite_parameter_grads(mha) == 8);
    BOOST_TEST(max_abs_diff(x.grad().select(0, 1), zeros({3, 4}, DType::f64)) == 0.0);
    // The output bias learns only from the rows that saw something.
    BOOST_TEST(max_abs_diff(mha.w_o().bias().grad(), kernels::sum(u.select(0, 0), {0})) < 1e-12);
    check_module_gradients(mha, [&](const std::vector<Variable>& in) { return mha.forward(in[0], mask).output; },
                           {x}, {mha.w_k().bias()});
  }
}

BOOST_AUTO_TEST_CASE(key_projection_bias_gets_no_gradient) {
  manual_seed(90);
  MultiHeadAttention mha({.d_model = 4, .n_head = 2});
  mha.to(DType::f64);
  sum(mha.forward(Variable(randn({2, 3, 4}, 91))).output * Variable(randn({2, 3, 4}, 92))).backward();
  // Softmax is shift-invariant per row, and the key bias shifts a whole row of scores.
  BOOST_TEST(max_abs_diff(mha.w_k().bias().grad(), zeros({4}, DType::f64)) < 1e-12);
  BOOST_TEST(max_abs_diff(mha.w_q().bias().grad(), zeros({4}, DType::f64)) > 1e-6);
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_layer_and_shapes) {
  AG_CHECK_THROWS_WITH(MultiHeadAttention({.d_model = 10, .n_head = 3}), std::invalid_argument, "MultiHeadAttention",
                       "d_model=10", "n_head=3");
  AG_CHECK_THROWS_WITH(MultiHeadAttention({.d_model = 8, .n_head = 0}), std::invalid_argument, "n_head=0");
  AG_CHECK_THROWS_WITH(MultiHeadAttention({.d_model = 8, .n_head = 2, .scale = 1, .temperature = 2}),
                       std::invalid_argument, "MultiHeadAttention", "temperature 2");
  MultiHeadAttention mha({.d_model = 8, .n_head = 2, .k_dim = 3});
  const Variable q(zeros({2, 4, 8})), k(zeros({2, 5, 3})), v(zeros({2, 5, 8}));
  AG_CHECK_THROWS_WITH(mha.forward(q, Variable(zeros({2, 5, 8})), v), std::invalid_argument, "MultiHeadAttention",
                       "key (B, Tk, 3)", "(2, 5, 8)");
  AG_CHECK_THROWS_WITH(mha.forward(q, k, Variable(zeros({2, 6, 8}))), std::invalid_argument, "(2, 6, 8)");
  AG_CHECK_THROWS_WITH(mha.forward(q, k, v, AttentionMask::causal(4)), std::invalid_argument, "MultiHeadAttention",
                       "causal(4)", "(2, 2, 4, 5)");
  AG_CHECK_THROWS_WITH(mha.forward(Variable(zeros({2, 4, 8}, DType::f64)), k, v), std::invalid_argument, "Linear",
                       "f64");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
