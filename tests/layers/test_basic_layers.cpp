// The building blocks: Linear, ReLU/GELU/Softmax, Dropout, LayerNorm, Embedding and the
// positional encodings. Values against formulas (or PyTorch), f64 gradient checks on inputs and
// every parameter, contiguous and transposed inputs, and the errors on bad input.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <numbers>
#include <numeric>

#include "layer_support.h"

namespace ag::testing {
namespace {

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double variance_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(linear)

BOOST_AUTO_TEST_CASE(init_is_uniform_within_one_over_sqrt_fan_in) {
  manual_seed(1);
  Linear lin(64, 48);
  BOOST_TEST(lin.weight().shape() == (Shape{48, 64}));
  BOOST_TEST(lin.bias().shape() == (Shape{48}));
  const double bound = 1.0 / 8.0;
  for (const Variable& p : {lin.weight(), lin.bias()}) {
    const std::vector<double> v = p.value().to_vector();
    BOOST_TEST(*std::max_element(v.begin(), v.end()) <= bound);
    BOOST_TEST(*std::min_element(v.begin(), v.end()) >= -bound);
  }
  // U(-b, b): mean 0, variance b^2 / 3, and the draws reach near both ends.
  const std::vector<double> w = lin.weight().value().to_vector();
  BOOST_TEST(std::abs(mean_of(w)) < 0.005);
  BOOST_TEST(std::abs(variance_of(w) / (bound * bound / 3.0) - 1.0) < 0.05);
  BOOST_TEST(*std::max_element(w.begin(), w.end()) > 0.95 * bound);
  BOOST_TEST(*std::min_element(w.begin(), w.end()) < -0.95 * bound);
  // Seeded: the same seed gives the same layer.
  manual_seed(1);
  Linear again(64, 48);
  BOOST_TEST(max_abs_diff(again.weight().value(), lin.weight().value()) == 0.0);
}

// quantize_weights: forward multiplies by the int8 copy (the Linear of the dequantized weight),
// the float weight stays as it was, and a forward that would need a gradient is refused.
BOOST_AUTO_TEST_CASE(a_quantized_linear_is_the_linear_of_its_dequantized_weight_and_has_no_gradient) {
  manual_seed(7);
  Linear lin(40, 6);
  const Tensor float_weight = lin.weight().value().clone();
  lin.quantize_weights();
  BOOST_TEST(lin.is_quantized());
  BOOST_TEST(max_abs_diff(lin.weight().value(), float_weight) == 0.0);
  const Variable x(randn({3, 40}, 8, DType::f32));
  {
    NoGradGuard no_grad;
    const Tensor want = ag::linear(x, Variable(dequantize(lin.quantized_weight())), lin.bias()).value();
    BOOST_TEST(max_abs_diff(lin(x).value(), want) <= 1e-5);
    BOOST_TEST(max_abs_diff(lin(x).value(), ag::linear(x, lin.weight(), lin.bias()).value()) > 1e-5);
  }
  AG_CHECK_THROWS_WITH(lin(x), std::logic_error, "quantized_linear", "'weight'", "quantized to int8");
  Linear f64(4, 2);
  f64.to(DType::f64);
  AG_CHECK_THROWS_WITH(f64.quantize_weights(), std::invalid_argument, "quantize_weights", "f64", "float32");
  BOOST_TEST(!f64.is_quantized());
}

BOOST_AUTO_TEST_CASE(forward_is_x_times_weight_transposed_plus_bias) {
  manual_seed(2);
  Linear lin(4, 3);
  lin.to(DType::f64);
  const Variable x(randn({2, 5, 4}, 3));
  const Tensor y = lin(x).value();
  BOOST_REQUIRE(y.shape() == (Shape{2, 5, 3}));
  double worst = 0;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t t = 0; t < 5; ++t) {
      for (int64_t o = 0; o < 3; ++o) {
        double expected = lin.bias().value().at({o});
        for (int64_t i = 0; i < 4; ++i) expected += x.value().at({b, t, i}) * lin.weight().value().at({o, i});
        worst = std::max(worst, std::abs(y.at({b, t, o}) - expected));
      }
    }
  }
  BOOST_TEST(worst < 1e-12);
  // A single vector gives a single output vector.
  const Variable v(randn({4}, 4));
  const Tensor yv = lin(v).value();
  BOOST_REQUIRE(yv.shape() == (Shape{3}));
  BOOST_TEST(max_abs_diff(yv, lin(reshape(v, {1, 4})).value().reshape({3})) < 1e-15);
}

BOOST_AUTO_TEST_CASE(gradcheck_inputs_and_parameters) {
  manual_seed(4);
  Linear lin(4, 3);
  const Variable x = randn_leaf({2, 3, 4}, 5, "x");
  check_module_gradients(lin, [&](const std::vector<Variable>& in) { return lin(in[0]); }, {x});
  // A transposed (non-contiguous) input.
  const Variable xt = randn_leaf({2, 4, 3}, 6, "xt");
  check_module_gradients(lin, [&](const std::vector<Variable>& in) { return lin(transpose(in[0], 1, 2)); }, {xt});
  // A vector input.
  const Variable v = randn_leaf({4}, 7, "v");
  check_module_gradients(lin, [&](const std::vector<Variable>& in) { return lin(in[0]); }, {v});
}

BOOST_AUTO_TEST_CASE(without_bias_has_only_a_weight) {
  manual_seed(8);
  Linear lin(LinearOptions{.in_features = 3, .out_features = 2, .bias = false});
  BOOST_TEST(lin.named_parameters().size() == 1u);
  BOOST_TEST(!lin.bias().defined());
  lin.to(DType::f64);
  const Variable x(zeros({5, 3}, DType::f64));
  BOOST_TEST(max_abs_diff(lin(x).value(), zeros({5, 2}, DType::f64)) == 0.0);  // no offset at all
  const Variable xr = randn_leaf({5, 3}, 9, "x");
  check_module_gradients(lin, [&](const std::vector<Variable>& in) { return lin(in[0]); }, {xr});
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_layer_and_shapes) {
  AG_CHECK_THROWS_WITH(Linear(0, 3), std::invalid_argument, "Linear", "in=0", "out=3");
  Linear lin(4, 3);
  AG_CHECK_THROWS_WITH(lin(Variable(zeros({2, 5}))), std::invalid_argument, "Linear", "(2, 5)", "in_features=4",
                       "(3, 4)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(activations)

BOOST_AUTO_TEST_CASE(relu_and_gelu_match_their_formulas) {
  const Variable x(randn({3, 7}, 10));
  const std::vector<double> xs = x.value().to_vector();
  ReLU relu_layer;
  GELU gelu_layer;
  const std::vector<double> r = relu_layer(x).value().to_vector();
  const std::vector<double> g = gelu_layer(x).value().to_vector();
  for (size_t i = 0; i < xs.size(); ++i) {
    BOOST_TEST(r[i] == std::max(xs[i], 0.0));
    BOOST_TEST(std::abs(g[i] - 0.5 * xs[i] * (1.0 + std::erf(xs[i] / std::sqrt(2.0)))) < 1e-12);
  }
  BOOST_TEST(apply_activation(Activation::gelu, x).value().to_vector() == g, boost::test_tools::per_element());
  const Variable leaf = randn_leaf({3, 5}, 11);
  check_gradients([&](const std::vector<Variable>& in) { return relu_layer(in[0]); }, {leaf});
  check_gradients([&](const std::vector<Variable>& in) { return gelu_layer(in[0]); }, {leaf});
}

// GPT-2's GELU against its formula in double, over inputs wide enough that the tails saturate,
// its distance from the exact form (it is an approximation, not a renaming), and its gradient.
BOOST_AUTO_TEST_CASE(gelu_tanh_matches_gpt2s_formula) {
  const Variable x = Variable(randn({4, 9}, 12)) * 4.0;
  const std::vector<double> xs = x.value().to_vector();
  const std::vector<double> y = apply_activation(Activation::gelu_tanh, x).value().to_vector();
  const std::vector<double> exact = apply_activation(Activation::gelu, x).value().to_vector();
  double apart = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    const double want = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    BOOST_TEST(std::abs(y[i] - want) <= 1e-14 * std::max(1.0, std::abs(want)), "x = " << v);
    apart = std::max(apart, std::abs(y[i] - exact[i]));
  }
  BOOST_TEST(apart > 1e-5);
  BOOST_TEST(activation_name(Activation::gelu_tanh) == std::string("gelu_tanh"));
  const Variable leaf = randn_leaf({3, 5}, 13);
  check_gradients([&](const std::vector<Variable>& in) { return apply_activation(Activation::gelu_tanh, in[0]); },
                  {leaf});
}

BOOST_AUTO_TEST_CASE(fused_softmax_equals_its_composition) {
  Softmax sm(1);
  Variable x = randn_leaf({2, 3, 4}, 12);
  const Variable fused = sm(x);
  const Variable e = exp(x);
  const Variable composed = e / sum(e, {1}, true);
  BOOST_TEST(max_abs_diff(fused.value(), composed.value()) < 1e-14);
  // Same gradients for the same cotangent.
  const Tensor u = randn({2, 3, 4}, 13);
  fused.backward(u);
  const Tensor g_fused = x.grad().clone();
  x.zero_grad();
  composed.backward(u);
  BOOST_TEST(max_abs_diff(g_fused, x.grad()) < 1e-13);
  check_gradients([&](const std::vector<Variable>& in) { return sm(in[0]); }, {x});
  // A transposed input, softmax along the last axis.
  Softmax last(-1);
  const Variable xt = randn_leaf({4, 3}, 14);
  check_gradients([&](const std::vector<Variable>& in) { return last(transpose(in[0], 0, 1)); }, {xt});
  AG_CHECK_THROWS_WITH(Softmax(3)(x), std::invalid_argument, "Softmax", "dim 3", "(2, 3, 4)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(dropout_layer)

BOOST_AUTO_TEST_CASE(train_zeroes_p_and_scales_the_rest) {
  manual_seed(20);
  Dropout drop(0.3);
  const Variable x(ones({200000}));
  const std::vector<double> y = drop(x).value().to_vector();
  int64_t zeros_seen = 0;
  double worst = 0;
  for (double v : y) {
    if (v == 0.0) ++zeros_seen;
    else worst = std::max(worst, std::abs(v - 1.0 / 0.7));
  }
  const double fraction = static_cast<double>(zeros_seen) / static_cast<double>(y.size());
  BOOST_TEST(std::abs(fraction - 0.3) < 0.005);  // ~5 standard deviations
  BOOST_TEST(worst < 1e-6);
  BOOST_TEST(std::abs(mean_of(y) - 1.0) < 0.01);
}

BOOST_AUTO_TEST_CASE(eval_is_the_identity) {
  Dropout drop(0.5);
  drop.eval();
  const Variable x(randn({50, 20}, 21));
  BOOST_TEST(max_abs_diff(drop(x).value(), x.value()) == 0.0);
  Dropout none(0.0);
  BOOST_TEST(max_abs_diff(none(x).value(), x.value()) == 0.0);  // p = 0 keeps everything, even in training
  Dropout all(1.0);
  BOOST_TEST(max_abs_diff(all(x).value(), zeros({50, 20}, DType::f64)) == 0.0);
}

BOOST_AUTO_TEST_CASE(masks_replay_with_the_generator_state) {
  manual_seed(22);
  Dropout drop(0.5);
  const Variable x(ones({64}));
  const GeneratorState start = default_generator().state();
  const Tensor first = drop(x).value();
  const Tensor second = drop(x).value();
  BOOST_TEST(max_abs_diff(first, second) > 0.0);  // each call draws a new mask
  default_generator().set_state(start);
  BOOST_TEST(max_abs_diff(drop(x).value(), first) == 0.0);
}

BOOST_AUTO_TEST_CASE(gradcheck_in_train_with_a_fixed_mask) {
  manual_seed(23);
  Dropout drop(0.4);
  const Variable x = randn_leaf({4, 6}, 24);
  check_gradients([&](const std::vector<Variable>& in) { return drop(in[0]); }, {x});
  drop.eval();
  check_gradients([&](const std::vector<Variable>& in) { return drop(in[0]); }, {x});
  AG_CHECK_THROWS_WITH(Dropout(1.5), std::invalid_argument, "Dropout", "1.5");
  AG_CHECK_THROWS_WITH(Dropout(-0.1), std::invalid_argument, "Dropout", "-0.1");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(layer_norm_layer)

BOOST_AUTO_TEST_CASE(output_rows_have_zero_mean_and_unit_variance) {
  LayerNorm ln(10);
  ln.to(DType::f64);
  const Variable x(kernels::affine(randn({6, 10}, 30), 3.0, 5.0));
  const Tensor y = ln(x).value();
  for (int64_t r = 0; r < 6; ++r) {
    const std::vector<double> row = y.select(0, r).to_vector();
    BOOST_TEST(std::abs(mean_of(row)) < 1e-12);
    const double var_x = variance_of(x.value().select(0, r).to_vector());
    // eps sits inside the square root: var(y) = var(x) / (var(x) + eps).
    BOOST_TEST(std::abs(variance_of(row) - var_x / (var_x + 1e-5)) < 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(fused_layer_norm_equals_its_composition) {
  LayerNorm ln(LayerNormOptions{.normalized_shape = {3, 4}, .eps = 1e-3});
  ln.to(DType::f64);
  Variable w = ln.weight(), b = ln.bias();
  w.mutable_value().copy_(randn({3, 4}, 31));
  b.mutable_value().copy_(randn({3, 4}, 32));
  Variable x = randn_leaf({2, 3, 4}, 33);
  const Variable fused = ln(x);
  const Variable mu = mean(x, {1, 2}, true);
  const Variable centred = x - mu;
  const Variable var = mean(centred * centred, {1, 2}, true);
  const Variable composed = centred / sqrt(var + 1e-3) * w + b;
  BOOST_TEST(max_abs_diff(fused.value(), composed.value()) < 1e-12);
  const Tensor u = randn({2, 3, 4}, 34);
  fused.backward(u);
  const Tensor gx = x.grad().clone(), gw = w.grad().clone(), gb = b.grad().clone();
  x.zero_grad();
  w.zero_grad();
  b.zero_grad();
  composed.backward(u);
  BOOST_TEST(max_abs_diff(gx, x.grad()) < 1e-12);
  BOOST_TEST(max_abs_diff(gw, w.grad()) < 1e-12);
  BOOST_TEST(max_abs_diff(gb, b.grad()) < 1e-12);
}

BOOST_AUTO_TEST_CASE(gradcheck_inputs_and_parameters) {
  LayerNorm ln(LayerNormOptions{.normalized_shape = {3, 4}});
  ln.to(DType::f64);
  Variable w = ln.weight(), b = ln.bias();
  w.mutable_value().copy_(randn({3, 4}, 35));
  b.mutable_value().copy_(randn({3, 4}, 36));
  const Variable x = randn_leaf({2, 3, 4}, 37);
  check_module_gradients(ln, [&](const std::vector<Variable>& in) { return ln(in[0]); }, {x});
  const Variable xt = randn_leaf({2, 4, 3}, 38);
  check_module_gradients(ln, [&](const std::vector<Variable>& in) { return ln(transpose(in[0], 1, 2)); }, {xt});
}

BOOST_AUTO_TEST_CASE(without_affine_has_no_parameters) {
  LayerNorm ln(5, 1e-5, /*elementwise_affine=*/false);
  BOOST_TEST(ln.parameters().empty());
  const Variable x = randn_leaf({3, 5}, 39);
  check_gradients([&](const std::vector<Variable>& in) { return ln(in[0]); }, {x});
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_layer_and_shapes) {
  LayerNorm ln(LayerNormOptions{.normalized_shape = {3, 4}});
  AG_CHECK_THROWS_WITH(ln(Variable(zeros({2, 4, 3}))), std::invalid_argument, "LayerNorm", "(2, 4, 3)", "(3, 4)");
  AG_CHECK_THROWS_WITH(LayerNorm(LayerNormOptions{.normalized_shape = {3, 0}}), std::invalid_argument, "LayerNorm",
                       "(3, 0)");
  AG_CHECK_THROWS_WITH(LayerNorm(4, 0.0), std::invalid_argument, "LayerNorm", "eps");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(embedding_layer)

BOOST_AUTO_TEST_CASE(init_is_standard_normal_with_a_zero_padding_row) {
  manual_seed(40);
  Embedding emb(1000, 16, 3);
  BOOST_TEST(emb.weight().shape() == (Shape{1000, 16}));
  const std::vector<double> w = emb.weight().value().to_vector();
  BOOST_TEST(std::abs(mean_of(w)) < 0.03);
  BOOST_TEST(std::abs(std::sqrt(variance_of(w)) - 1.0) < 0.03);
  BOOST_TEST(max_abs_diff(emb.weight().value().select(0, 3), zeros({16})) == 0.0);
  // Negative padding indices count from the end, as in PyTorch.
  Embedding last(10, 4, -1);
  BOOST_TEST(last.padding_row() == 9);
  BOOST_TEST(max_abs_diff(last.weight().value().select(0, 9), zeros({4})) == 0.0);
}

BOOST_AUTO_TEST_CASE(forward_gathers_rows_and_padding_gets_no_gradient) {
  manual_seed(41);
  Embedding emb(5, 3, 0);
  const Indices ids({2, 3}, {1, 2, 1, 0, 4, 0});
  const Variable y = emb(ids);
  BOOST_REQUIRE(y.shape() == (Shape{2, 3, 3}));
  BOOST_TEST(max_abs_diff(y.value().select(0, 1).select(0, 1), emb.weight().value().select(0, 4)) == 0.0);
  sum(y).backward();
  const Tensor g = emb.weight().grad();
  const std::vector<double> counts{0, 2, 1, 0, 1};  // row 0 is padding: no gradient though read twice
  for (int64_t r = 0; r < 5; ++r) {
    BOOST_TEST(max_abs_diff(g.select(0, r), full({3}, counts[static_cast<size_t>(r)])) == 0.0, "row " << r);
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_weight) {
  manual_seed(42);
  Embedding emb(6, 3, 0);
  // Padding rows are excluded from the check on purpose: they are read but, by contract, not trained.
  const Indices ids({2, 2}, {1, 5, 5, 2});
  check_module_gradients(emb, [&](const std::vector<Variable>&) { return emb(ids); }, {});
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_layer_and_values) {
  AG_CHECK_THROWS_WITH(Embedding(5, 3, 5), std::invalid_argument, "Embedding", "padding_idx 5");
  AG_CHECK_THROWS_WITH(Embedding(0, 3), std::invalid_argument, "Embedding", "0");
  Embedding emb(5, 3);
  AG_CHECK_THROWS_WITH(emb(Indices({2}, {1, 7})), std::invalid_argument, "Embedding", "id 7", "[0, 5)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(positional)

// PyTorch's tutorial table for d_model=6 (computed with /usr/bin/python3, torch 1.13, f32):
//   div_term = exp(arange(0, 6, 2) * (-log(10000) / 6)); pe[:, 0::2] = sin(t * div_term); pe[:, 1::2] = cos(...)
BOOST_AUTO_TEST_CASE(sinusoidal_table_matches_pytorch) {
  SinusoidalPositionalEncoding pe(6, 10);
  const std::vector<double> row3{0.14112000167369843, -0.9899924993515015, 0.1387980878353119,
                                 0.9903206825256348,  0.006463258992880583, 0.9999791383743286};
  const std::vector<double> row9{0.41211849451065063, -0.9111302495002747, 0.4056985676288605,
                                 0.9140069484710693,  0.019388698041439056, 0.9998120069503784};
  BOOST_TEST(max_abs_diff(pe.encoding(10).select(0, 3), from_vector(row3, {6})) < 2e-6);
  BOOST_TEST(max_abs_diff(pe.encoding(10).select(0, 9), from_vector(row9, {6})) < 2e-6);
  BOOST_TEST(pe.encoding(4).shape() == (Shape{4, 6}));
  // An odd d_model ends on a sine column.
  SinusoidalPositionalEncoding odd(5, 4);
  BOOST_TEST(std::abs(odd.encoding(4).at({3, 4}) - std::sin(3.0 * std::pow(10000.0, -4.0 / 5.0))) < 1e-6);
  // A buffer, not a parameter.
  BOOST_TEST(pe.parameters().empty());
  BOOST_TEST(pe.named_buffers().size() == 1u);
}

BOOST_AUTO_TEST_CASE(sinusoidal_adds_the_table_and_passes_gradients) {
  SinusoidalPositionalEncoding pe(4, 8);
  pe.to(DType::f64);
  const Variable x = randn_leaf({2, 3, 4}, 50);
  const Tensor y = pe(x).value();
  BOOST_TEST(max_abs_diff(y.select(0, 1), kernels::add(x.value().select(0, 1), pe.encoding(3))) == 0.0);
  check_gradients([&](const std::vector<Variable>& in) { return pe(in[0]); }, {x});
  AG_CHECK_THROWS_WITH(pe(Variable(zeros({1, 9, 4}, DType::f64))), std::invalid_argument,
                       "SinusoidalPositionalEncoding", "(1, 9, 4)", "max_len=8");
  AG_CHECK_THROWS_WITH(pe(Variable(zeros({1, 3, 5}, DType::f64))), std::invalid_argument, "d_model=4");
}

BOOST_AUTO_TEST_CASE(learned_adds_its_rows_and_trains_them) {
  manual_seed(51);
  LearnedPositionalEmbedding pos(5, 4);
  BOOST_TEST(pos.num_parameters() == 20);
  pos.to(DType::f64);
  const Variable x = randn_leaf({2, 3, 4}, 52);
  BOOST_TEST(max_abs_diff(pos(x).value().select(0, 0), kernels::add(x.value().select(0, 0),
                                                                     pos.weight().value().narrow(0, 0, 3))) == 0.0);
  check_module_gradients(pos, [&](const std::vector<Variable>& in) { return pos(in[0]); }, {x});
  const Variable x2 = randn_leaf({3, 4}, 53);  // unbatched
  check_module_gradients(pos, [&](const std::vector<Variable>& in) { return pos(in[0]); }, {x2});
  AG_CHECK_THROWS_WITH(pos(Variable(zeros({2, 6, 4}, DType::f64))), std::invalid_argument,
                       "LearnedPositionalEmbedding", "(2, 6, 4)", "max_len=5");
}

BOOST_AUTO_TEST_SUITE_END()


BOOST_AUTO_TEST_SUITE(layer_sizes_that_overflow)

// Linear(4, 2^62) once wrote past a 64-byte block; the layers now refuse it before allocating.
BOOST_AUTO_TEST_CASE(linear_and_embedding_refuse_sizes_that_do_not_fit) {
  const int64_t huge = int64_t{1} << 62;
  AG_CHECK_THROWS_WITH(Linear(LinearOptions{.in_features = 4, .out_features = huge}), std::invalid_argument,
                       "Linear weight", "(4611686018427387904, 4)");
  AG_CHECK_THROWS_WITH(Embedding(EmbeddingOptions{.num_embeddings = huge, .embedding_dim = 4, .padding_idx = {}}),
                       std::invalid_argument,
                       "Embedding weight", "(4611686018427387904, 4)");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
