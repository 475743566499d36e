// Fused neural-network ops (autograd/nn_ops.h): float64 gradient checks on inputs and weights
// (masked, broadcast and non-contiguous cases included), fused == composed from the primitives
// of ops.h, PyTorch reference values (reference_nn_ops.h, made by reference_nn_ops.py), the
// documented edge cases, and bad input.
#include <cmath>
#include <limits>

#include "nn_ops_support.h"
#include "reference_nn_ops.h"

namespace ag {
namespace {

using namespace testing;
namespace ref = testing::torch_reference;

BOOST_AUTO_TEST_SUITE(nn_ops)

// ---------------------------------------------------------------------------------------------
// layer_norm

// The fused softmax and log_softmax against their twins from exp, sum and log, along the last
// axis, a middle axis (strided rows) and a transposed view, in value and gradient.
BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_equal_their_compositions) {
  const Shape shape{3, 5, 7};
  const Variable x = testing::randn_leaf(shape, 41, "x");
  const Variable xt = transposed_leaf({3, 7, 5}, 1, 2, 42);
  for (const int64_t axis : {int64_t{-1}, int64_t{1}, int64_t{0}}) {
    check_twins([&] { return softmax(x, axis); }, [&] { return composed::softmax(x, axis); }, {x},
                wave(shape, 0.23, 0.4));
    check_twins([&] { return log_softmax(x, axis); }, [&] { return composed::log_softmax(x, axis); }, {x},
                wave(shape, 0.31, 0.1));
  }
  check_twins([&] { return softmax(xt, -1); }, [&] { return composed::softmax(xt, -1); }, {xt},
              wave({3, 7, 5}, 0.19, 0.7));
}

BOOST_AUTO_TEST_CASE(layer_norm_matches_pytorch) {
  const Variable x = leaf(wave({2, 3, 4}, 0.37, 0.1, 2.0, 0.5));
  const Variable w = leaf(wave({3, 4}, 0.91, 0.2, 0.5, 1.0));
  const Variable b = leaf(wave({3, 4}, 0.53, 1.3, 0.3));
  const Variable y = layer_norm(x, w, b, 2, 1e-5);
  y.backward(wave({2, 3, 4}, 0.29, 0.4));
  check_values(y.value(), ref::kLayerNormY, kTwinTol, "y");
  check_values(x.grad(), ref::kLayerNormDx, kTwinTol, "dx");
  check_values(w.grad(), ref::kLayerNormDweight, kTwinTol, "dweight");
  check_values(b.grad(), ref::kLayerNormDbias, kTwinTol, "dbias");
}

struct LayerNormCase {
  Shape shape;
  int64_t dims;
  bool weight, bias;
};

BOOST_AUTO_TEST_CASE(layer_norm_gradcheck_over_shapes_and_affine_parts) {
  const std::vector<LayerNormCase> cases = {
      {{4, 6}, 1, true, true},  {{2, 3, 4}, 2, true, true},  {{3, 4}, 2, true, true}, {{2, 3, 4}, 1, false, false},
      {{2, 3, 4}, 2, true, false}, {{5, 3}, 1, false, true}, {{7}, 1, true, true},
      // rows of exactly one and of several 8-wide lane groups, with and without a tail
      {{3, 8}, 1, true, true}, {{2, 19}, 1, true, false}, {{2, 2, 16}, 1, false, true},
  };
  uint64_t seed = 10;
  for (const LayerNormCase& c : cases) {
    BOOST_TEST_CONTEXT("x " << c.shape << " over " << c.dims << " axes, weight " << c.weight << " bias " << c.bias) {
      const Shape norm(std::vector<int64_t>(c.shape.end() - c.dims, c.shape.end()));
      const Variable x = testing::randn_leaf(c.shape, ++seed, "x");
      const Variable w = c.weight ? leaf(wave(norm, 0.7, 0.3, 0.5, 1.0), "weight") : Variable();
      const Variable b = c.bias ? leaf(wave(norm, 0.4, 0.9), "bias") : Variable();
      GradcheckOptions opt;  // weight and bias are checked as parameters the function closes over
      if (w.defined()) opt.params.push_back(w);
      if (b.defined()) opt.params.push_back(b);
      check_gradients([&](const std::vector<Variable>& in) { return layer_norm(in[0], w, b, c.dims); }, {x}, opt);
      std::vector<Variable> leaves{x};
      leaves.insert(leaves.end(), opt.params.begin(), opt.params.end());
      check_twins([&] { return layer_norm(x, w, b, c.dims, 1e-5); },
                  [&] { return composed::layer_norm(x, w, b, c.dims, 1e-5); }, leaves, wave(c.shape, 0.33, 0.2));
    }
  }
}

// Big enough for the backward's blocks of rows (the last one short) and a lane tail: fused and
// composed agree, with and without the affine parts.
BOOST_AUTO_TEST_CASE(layer_norm_over_many_row_blocks_equals_its_composition) {
  const Shape shape{3, 17, 700};
  const Variable x = testing::randn_leaf(shape, 77, "x");
  const Variable w = leaf(wave({700}, 0.7, 0.3, 0.5, 1.0), "weight");
  const Variable b = leaf(wave({700}, 0.4, 0.9), "bias");
  check_twins([&] { return layer_norm(x, w, b, 1, 1e-5); }, [&] { return composed::layer_norm(x, w, b, 1, 1e-5); },
              {x, w, b}, wave(shape, 0.33, 0.2));
  check_twins([&] { return layer_norm(x, Variable(), Variable(), 1, 1e-5); },
              [&] { return composed::layer_norm(x, Variable(), Variable(), 1, 1e-5); }, {x}, wave(shape, 0.41, 0.3));
}

BOOST_AUTO_TEST_CASE(layer_norm_reads_non_contiguous_input) {
  const Variable x = transposed_leaf({3, 5, 4}, 0, 2, 7);  // (3, 5, 4) view of a (4, 5, 3) tensor
  BOOST_REQUIRE(!x.value().is_contiguous());
  const Variable w = leaf(wave({5, 4}, 0.5, 0.1, 0.4, 1.0), "weight");
  const Variable b = leaf(wave({5, 4}, 0.8, 0.2), "bias");
  check_gradients([&](const std::vector<Variable>& in) { return layer_norm(in[0], in[1], in[2], 2); }, {x, w, b});
  check_twins([&] { return layer_norm(x, w, b, 2); }, [&] { return composed::layer_norm(x, w, b, 2, 1e-5); }, {x, w, b},
              wave({3, 5, 4}, 0.21, 0.5));
}

BOOST_AUTO_TEST_CASE(layer_norm_only_bias_needs_grad) {
  const Variable x(wave({3, 4}, 0.3, 0.2), false);
  const Variable b = leaf(zeros({4}, DType::f64), "bias");
  layer_norm(x, Variable(), b, 1).backward(wave({3, 4}, 0.9, 0.1));
  const Tensor expected = kernels::sum(wave({3, 4}, 0.9, 0.1), {0});
  BOOST_TEST(max_abs_diff(b.grad(), expected) <= kTwinTol);
}

BOOST_AUTO_TEST_CASE(layer_norm_rejects_bad_input) {
  const Variable x(zeros({2, 3, 4}, DType::f64));
  const Variable w(zeros({3}, DType::f64));
  AG_CHECK_THROWS_WITH(layer_norm(x, w, Variable(), 1), std::invalid_argument, "layer_norm", "(3,)", "(2, 3, 4)");
  AG_CHECK_THROWS_WITH(layer_norm(x, Variable(), Variable(), 4), std::invalid_argument, "layer_norm", "(2, 3, 4)");
  AG_CHECK_THROWS_WITH(layer_norm(x, Variable(), Variable(), 0), std::invalid_argument, "layer_norm");
  AG_CHECK_THROWS_WITH(layer_norm(x, Variable(), Variable(), 1, -1.0), std::invalid_argument, "layer_norm", "eps");
  AG_CHECK_THROWS_WITH(layer_norm(x, Variable(zeros({4})), Variable(), 1), std::invalid_argument, "layer_norm", "f32");
}

// ---------------------------------------------------------------------------------------------
// dropout

BOOST_AUTO_TEST_CASE(dropout_masks_scales_and_gradchecks_in_training) {
  GeneratorStateGuard restore;
  manual_seed(42);
  const double p = 0.3;
  const Variable x = testing::randn_leaf({6, 7}, 3, "x");
  check_gradients([&](const std::vector<Variable>& in) { return dropout(in[0], p, true); }, {x});
  // The same state gives the same mask: dropped elements are 0, kept ones x / (1 - p), and the
  // gradient has exactly that pattern.
  const Variable y = dropout(x, p, true);
  y.backward(ones({6, 7}, DType::f64));
  const std::vector<double> xv = x.value().to_vector(), yv = y.value().to_vector(), gv = x.grad().to_vector();
  int dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0.0) {
      ++dropped;
      BOOST_TEST(gv[i] == 0.0);
    } else {
      BOOST_TEST(std::abs(yv[i] - xv[i] / (1 - p)) <= 1e-14);
      BOOST_TEST(std::abs(gv[i] - 1 / (1 - p)) <= 1e-14);
    }
  }
  BOOST_TEST(dropped > 0);
  BOOST_TEST(dropped < 42);
}

BOOST_AUTO_TEST_CASE(dropout_mask_follows_logical_index_not_memory_layout) {
  GeneratorStateGuard restore;
  const Variable xt = transposed_leaf({5, 8}, 0, 1, 9);
  const Variable xc(xt.value().contiguous(), true);
  manual_seed(5);
  const Variable yt = dropout(xt, 0.5, true);
  manual_seed(5);
  const Variable yc = dropout(xc, 0.5, true);
  BOOST_TEST(max_abs_diff(yt.value(), yc.value()) == 0.0);
  manual_seed(5);
  check_gradients([&](const std::vector<Variable>& in) { return dropout(in[0], 0.5, true); }, {xt});
  // The mask depends on the dtype nowhere: f32 drops the same elements as f64.
  manual_seed(5);
  const Variable y32 = dropout(Variable(xc.value().to(DType::f32)), 0.5, true);
  const std::vector<double> a = yc.value().to_vector(), b = y32.value().to_vector();
  for (size_t i = 0; i < a.size(); ++i) BOOST_TEST((a[i] == 0.0) == (b[i] == 0.0));
}

BOOST_AUTO_TEST_CASE(dropout_is_identity_in_eval_and_for_p_zero) {
  GeneratorStateGuard restore;
  manual_seed(1);
  const GeneratorState before = default_generator().state();
  const Variable x = testing::randn_leaf({4, 4}, 2);
  BOOST_TEST(dropout(x, 0.5, false).id() == x.id());
  BOOST_TEST(dropout(x, 0.0, true).id() == x.id());
  BOOST_TEST((default_generator().state() == before));  // no stream claimed
  const Variable all = dropout(x, 1.0, true);
  BOOST_TEST(max_abs_diff(all.value(), zeros({4, 4}, DType::f64)) == 0.0);
  sum(all).backward();
  BOOST_TEST(max_abs_diff(x.grad(), zeros({4, 4}, DType::f64)) == 0.0);
}

BOOST_AUTO_TEST_CASE(dropout_statistics_keep_fraction_and_mean) {
  Generator gen(2024);
  const int64_t n = 200000;
  for (double p : {0.1, 0.5, 0.8}) {
    const Tensor y = dropout(Variable(ones({n}, DType::f32)), p, true, gen).value();
    const std::vector<double> v = y.to_vector();
    double kept = 0, total = 0;
    for (double e : v) {
      kept += e != 0.0 ? 1 : 0;
      total += e;
    }
    BOOST_TEST(std::abs(kept / n - (1 - p)) < 0.01, "p=" << p << " keep fraction " << kept / n);
    BOOST_TEST(std::abs(total / n - 1.0) < 0.02, "p=" << p << " mean " << total / n);
  }
  // Successive calls draw different masks; replaying the state replays the mask.
  Generator a(7), b(7);
  const Tensor m1 = dropout(Variable(ones({64}, DType::f64)), 0.5, true, a).value();
  const Tensor m2 = dropout(Variable(ones({64}, DType::f64)), 0.5, true, a).value();
  const Tensor m1_again = dropout(Variable(ones({64}, DType::f64)), 0.5, true, b).value();
  BOOST_TEST(max_abs_diff(m1, m2) > 0.0);
  BOOST_TEST(max_abs_diff(m1, m1_again) == 0.0);
}

BOOST_AUTO_TEST_CASE(dropout_rejects_probabilities_outside_unit_interval) {
  const Variable x(zeros({2}, DType::f64));
  AG_CHECK_THROWS_WITH(dropout(x, -0.1, true), std::invalid_argument, "dropout", "p=");
  AG_CHECK_THROWS_WITH(dropout(x, 1.5, false), std::invalid_argument, "dropout", "p=1.5");
  AG_CHECK_THROWS_WITH(dropout(x, std::nan(""), true), std::invalid_argument, "dropout", "p=");
}

// ---------------------------------------------------------------------------------------------
// embedding

BOOST_AUTO_TEST_CASE(embedding_gathers_rows_and_scatter_adds_repeated_ids) {
  const Variable w = leaf(wave({5, 3}, 0.7, 0.2), "weight");
  const Indices ids({2, 3}, {4, 1, 4, 0, 4, 2});
  const Variable y = embedding(w, ids);
  BOOST_TEST((y.shape() == Shape{2, 3, 3}));
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 3; ++j) BOOST_TEST(y.value().at({i / 3, i % 3, j}) == w.value().at({ids[i], j}));
  }
  check_gradients([&](const std::vector<Variable>& in) { return embedding(in[0], ids); }, {w});
  const Tensor g = wave({2, 3, 3}, 0.3, 0.5);
  y.backward(g);
  for (int64_t j = 0; j < 3; ++j) {  // id 4 appears at positions 0, 2 and 4: its gradients add up
    const double expected = g.at({0, 0, j}) + g.at({0, 2, j}) + g.at({1, 1, j});
    BOOST_TEST(std::abs(w.grad().at({4, j}) - expected) <= 1e-15);
    BOOST_TEST(w.grad().at({3, j}) == 0.0);  // never looked up
  }
}

BOOST_AUTO_TEST_CASE(embedding_padding_row_reads_but_gets_no_gradient) {
  const Variable w = leaf(wave({4, 2}, 0.9, 0.1), "weight");
  const Indices ids({5}, {0, 2, 1, 2, 0});
  const Variable y = embedding(w, ids, /*padding_idx=*/2);
  BOOST_TEST(y.value().at({1, 1}) == w.value().at({2, 1}));  // the padding row reads normally
  const Tensor g = wave({5, 2}, 0.6, 0.3);
  y.backward(g);
  for (int64_t j = 0; j < 2; ++j) {
    BOOST_TEST(w.grad().at({2, j}) == 0.0);
    BOOST_TEST(std::abs(w.grad().at({0, j}) - (g.at({0, j}) + g.at({4, j}))) <= 1e-15);
    BOOST_TEST(std::abs(w.grad().at({1, j}) - g.at({2, j})) <= 1e-15);
  }
}

BOOST_AUTO_TEST_CASE(embedding_rejects_bad_ids_and_tables) {
  const Variable w(zeros({5, 3}, DType::f64));
  AG_CHECK_THROWS_WITH(embedding(w, Indices({3}, {0, 7, 1})), std::invalid_argument, "embedding", "id 7", "size 5");
  AG_CHECK_THROWS_WITH(embedding(w, Indices({2}, {-1, 0})), std::invalid_argument, "embedding", "id -1");
  AG_CHECK_THROWS_WITH(embedding(w, Indices({1}, {0}), 5), std::invalid_argument, "embedding", "padding_idx 5");
  AG_CHECK_THROWS_WITH(embedding(Variable(zeros({5}, DType::f64)), Indices({1}, {0})), std::invalid_argument,
                       "embedding", "(5,)");
}

// ---------------------------------------------------------------------------------------------
// cross_entropy

const Indices kCeTargets({2, 3}, {1, 3, 4, 0, 3, 2});  // 3 is the ignore_index below

CrossEntropyOptions ce_options(Reduction reduction, double smoothing, int64_t ignore = 3) {
  CrossEntropyOptions o;
  o.reduction = reduction;
  o.label_smoothing = smoothing;
  o.ignore_index = ignore;
  return o;
}

BOOST_AUTO_TEST_CASE(cross_entropy_matches_pytorch_with_smoothing_and_ignore_index) {
  const struct {
    Reduction reduction;
    const std::vector<double>& loss;
    const std::vector<double>& dlogits;
  } cases[] = {{Reduction::mean, ref::kCrossEntropyLossMean, ref::kCrossEntropyDlogitsMean},
               {Reduction::sum, ref::kCrossEntropyLossSum, ref::kCrossEntropyDlogitsSum},
               {Reduction::none, ref::kCrossEntropyLossNone, ref::kCrossEntropyDlogitsNone}};
  for (const auto& c : cases) {
    const Variable logits = leaf(wave({2, 3, 5}, 0.47, 0.3, 3.0));
    const Variable loss = cross_entropy(logits, kCeTargets, ce_options(c.reduction, 0.2));
    loss.backward(c.reduction == Reduction::none ? wave({2, 3}, 0.61, 0.7) : Tensor());
    check_values(loss.value(), c.loss, kTwinTol, "loss");
    check_values(logits.grad(), c.dlogits, kTwinTol, "dlogits");
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradcheck_and_twin_over_reductions_and_smoothing) {
  for (Reduction reduction : {Reduction::mean, Reduction::sum, Reduction::none}) {
    for (double smoothing : {0.0, 0.2, 1.0}) {
      BOOST_TEST_CONTEXT("reduction " << static_cast<int>(reduction) << " label_smoothing " << smoothing) {
        const CrossEntropyOptions o = ce_options(reduction, smoothing);
        const Variable logits = testing::randn_leaf({2, 3, 5}, 31, "logits");  // (B, T, C)
        check_gradients([&](const std::vector<Variable>& in) { return cross_entropy(in[0], kCeTargets, o); },
                        {logits});
        const Tensor up = reduction == Reduction::none ? wave({2, 3}, 0.8, 0.1) : Tensor();
        check_twins([&] { return cross_entropy(logits, kCeTargets, o); },
                    [&] { return composed::cross_entropy(logits, kCeTargets, o); }, {logits}, up);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_reads_non_contiguous_logits) {
  const Variable logits = transposed_leaf({4, 6}, 0, 1, 12);
  const Indices targets({4}, {5, 0, 2, 2});
  const CrossEntropyOptions o = ce_options(Reduction::mean, 0.1, -100);
  check_gradients([&](const std::vector<Variable>& in) { return cross_entropy(in[0], targets, o); }, {logits});
  check_twins([&] { return cross_entropy(logits, targets, o); },
              [&] { return composed::cross_entropy(logits, targets, o); }, {logits});
}

BOOST_AUTO_TEST_CASE(cross_entropy_all_ignored_mean_is_zero_with_zero_gradient) {
  const Variable logits = testing::randn_leaf({3, 4}, 5);
  const Variable loss = cross_entropy(logits, Indices({3}, {-100, -100, -100}));
  BOOST_TEST(loss.item() == 0.0);  // PyTorch: NaN
  loss.backward();
  BOOST_TEST(max_abs_diff(logits.grad(), zeros({3, 4}, DType::f64)) == 0.0);
}

BOOST_AUTO_TEST_CASE(cross_entropy_is_stable_for_huge_logits) {
  const Variable logits = leaf(from_vector(std::vector<double>{1000.0, 0.0, -1000.0, 0.0, 800.0, 800.0}, {2, 3},
                                           DType::f32));
  const Variable loss = cross_entropy(logits, Indices({2}, {1, 2}), ce_options(Reduction::none, 0.0));
  BOOST_TEST(std::abs(loss.value().at({0}) - 1000.0) <= 1e-3);
  BOOST_TEST(std::abs(loss.value().at({1}) - std::log(2.0)) <= 1e-6);
  loss.backward(ones({2}, DType::f32));
  for (double g : logits.grad().to_vector()) BOOST_TEST(std::isfinite(g));
}

BOOST_AUTO_TEST_CASE(cross_entropy_rejects_bad_targets_and_options) {
  const Variable logits(zeros({2, 3, 5}, DType::f64));
  AG_CHECK_THROWS_WITH(cross_entropy(logits, Indices({2, 3}, {0, 1, 5, 0, 0, 0})), std::invalid_argument,
                       "cross_entropy", "target 5", "(0, 2)", "5 classes");
  AG_CHECK_THROWS_WITH(cross_entropy(logits, Indices({6}, {0, 0, 0, 0, 0, 0})), std::invalid_argument,
                       "cross_entropy", "(6,)", "(2, 3, 5)", "(2, 3)");
  AG_CHECK_THROWS_WITH(cross_entropy(logits, kCeTargets, ce_options(Reduction::mean, 1.5)), std::invalid_argument,
                       "cross_entropy", "label_smoothing");
}

// ---------------------------------------------------------------------------------------------
// scaled_dot_product_attention

BOOST_AUTO_TEST_CASE(attention_matches_pytorch_with_key_padding_and_bias) {
  const Variable q = leaf(wave({2, 2, 3, 4}, 0.31, 0.2));
  const Variable k = leaf(wave({2, 2, 5, 4}, 0.23, 0.9));
  const Variable v = leaf(wave({2, 2, 5, 3}, 0.17, 0.5));
  const Variable bias = leaf(wave({1, 2, 3, 5}, 0.41, 0.6, 0.5));
  const AttentionResult r = scaled_dot_product_attention(q, k, v, AttentionMask::keep(key_padding({5, 3}, 5)), bias);
  r.output.backward(wave({2, 2, 3, 3}, 0.37, 1.1));
  check_values(r.output.value(), ref::kAttentionOut, kTwinTol, "output");
  check_values(r.weights, ref::kAttentionWeights, kTwinTol, "weights");
  check_values(q.grad(), ref::kAttentionDq, kTwinTol, "dq");
  check_values(k.grad(), ref::kAttentionDk, kTwinTol, "dk");
  check_values(v.grad(), ref::kAttentionDv, kTwinTol, "dv");
  check_values(bias.grad(), ref::kAttentionDbias, kTwinTol, "dbias");
}

struct AttentionCase {
  std::string name;
  int64_t tq, tk, dk, dv;
  AttentionMask mask;
  Shape bias;  // empty: no bias
  double dropout = 0.0;
  bool transposed = false;  // q, k, v permuted views of (B, T, H, D) tensors; bias transposed too
};

BOOST_AUTO_TEST_CASE(attention_gradcheck_and_twin_over_masks_shapes_and_layouts) {
  const std::vector<AttentionCase> cases = {
      {"plain, Tq != Tk, Dk != Dv", 3, 5, 4, 2, {}, {}},
      {"causal keep pattern", 4, 4, 3, 3, AttentionMask::keep(causal(4)), {}},
      {"key padding pattern (B, 1, 1, Tk)", 3, 5, 2, 3, AttentionMask::keep(key_padding({5, 2}, 5)), {}},
      {"additive bias (H, Tq, Tk)", 3, 4, 3, 2, {}, {2, 3, 4}},
      {"bias (B, 1, Tq, Tk) and causal pattern", 4, 4, 2, 2, AttentionMask::keep(causal(4)), {2, 1, 4, 4}},
      {"dropout in training", 3, 5, 3, 4, AttentionMask::keep(key_padding({4, 5}, 5)), {1, 1, 3, 5}, 0.4},
      {"non-contiguous q, k, v", 3, 5, 4, 3, AttentionMask::keep(key_padding({3, 5}, 5)), {}, 0.0, true},
      {"non-contiguous with dropout and bias", 4, 4, 2, 3, AttentionMask::keep(causal(4)), {4, 4}, 0.25, true},
      // The structured masks, which the kernel reads without a dense tensor.
      {"causal", 4, 4, 3, 2, AttentionMask::causal(4), {}},
      {"causal after 3 cached keys", 3, 6, 2, 3, AttentionMask::causal(3, 3), {2, 3, 6}},
      {"key lengths, one of them 0", 3, 5, 2, 3, AttentionMask::key_padding({5, 0}, 5), {}},
      {"causal & key lengths", 4, 4, 3, 3, AttentionMask::causal(4) & AttentionMask::key_padding({4, 2}, 4), {}},
      {"causal offset & key lengths & pattern, with bias and dropout", 3, 5, 2, 2,
       AttentionMask::causal(3, 2) & AttentionMask::key_padding({4, 5}, 5) &
           AttentionMask::keep(from_vector(std::vector<double>{1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1}, {3, 5},
                                           DType::f64)),
       {1, 2, 3, 5}, 0.3},
      {"non-contiguous with causal offset & key lengths", 2, 5, 3, 2,
       AttentionMask::causal(2, 3) & AttentionMask::key_padding({3, 5}, 5), {}, 0.0, true},
  };
  const int64_t B = 2, H = 2;
  uint64_t seed = 100;
  for (const AttentionCase& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      GeneratorStateGuard restore;
      manual_seed(77);
      const auto make = [&](int64_t t, int64_t d) {
        return c.transposed ? transposed_leaf({B, H, t, d}, 1, 2, ++seed) : testing::randn_leaf({B, H, t, d}, ++seed);
      };
      const Variable q = make(c.tq, c.dk), k = make(c.tk, c.dk), v = make(c.tk, c.dv);
      if (c.transposed) BOOST_REQUIRE(!q.value().is_contiguous());
      const Variable bias = c.bias.empty()  ? Variable()
                            : c.transposed ? transposed_leaf(c.bias, -2, -1, ++seed)
                                           : randn_leaf(c.bias, ++seed, "bias");
      const AttentionMask& keep = c.mask;
      AttentionOptions o;
      o.dropout = c.dropout;
      o.training = c.dropout > 0;
      GradcheckOptions gopt;
      if (bias.defined()) gopt.params.push_back(bias);
      check_gradients(
          [&](const std::vector<Variable>& in) {
            return scaled_dot_product_attention(in[0], in[1], in[2], keep, bias, o).output;
          },
          {q, k, v}, gopt);
      std::vector<Variable> leaves{q, k, v};
      if (bias.defined()) leaves.push_back(bias);
      const Tensor up = wave({B, H, c.tq, c.dv}, 0.43, 0.2);
      const GeneratorState state = default_generator().state();
      check_twins(
          [&] {
            default_generator().set_state(state);
            return scaled_dot_product_attention(q, k, v, keep, bias, o).output;
          },
          [&] {
            default_generator().set_state(state);
            return composed::scaled_dot_product_attention(q, k, v, keep, bias, o);
          },
          leaves, up);
    }
  }
}

BOOST_AUTO_TEST_CASE(attention_dropout_changes_output_not_weights) {
  GeneratorStateGuard restore;
  const Variable q = testing::randn_leaf({1, 2, 4, 3}, 1), k = testing::randn_leaf({1, 2, 4, 3}, 2);
  const Variable v = testing::randn_leaf({1, 2, 4, 3}, 3);
  AttentionOptions train;
  train.dropout = 0.5;
  train.training = true;
  Generator gen(9);
  train.generator = &gen;
  const AttentionResult eval = scaled_dot_product_attention(q, k, v);
  const AttentionResult dropped = scaled_dot_product_attention(q, k, v, {}, Variable(), train);
  BOOST_TEST(max_abs_diff(eval.weights, dropped.weights) == 0.0);
  BOOST_TEST(max_abs_diff(eval.output.value(), dropped.output.value()) > 1e-3);
  BOOST_TEST((gen.state().call == 1));  // the explicit generator, not the default one, was used
}

// What a KV cache needs: the last 3 of 7 queries against all 7 keys under causal(3, offset=4)
// are the last 3 rows of causal(7) attention, in value and in the gradients of q, k and v.
BOOST_AUTO_TEST_CASE(attention_causal_with_offset_is_the_tail_of_causal) {
  const int64_t T = 7, past = 4, t_new = T - past;
  const Variable q = testing::randn_leaf({2, 2, T, 4}, 31), k = testing::randn_leaf({2, 2, T, 4}, 32);
  const Variable v = testing::randn_leaf({2, 2, T, 3}, 33);
  const Tensor up = wave({2, 2, t_new, 3}, 0.29, 0.4);
  const Variable full = scaled_dot_product_attention(q, k, v, AttentionMask::causal(T)).output;
  narrow(full, 2, past, t_new).backward(up);
  const Tensor dq = q.grad().narrow(2, past, t_new).contiguous(), dk = k.grad().clone(), dv = v.grad().clone();
  for (Variable l : {q, k, v}) l.zero_grad();
  const Variable tail_q(q.value().narrow(2, past, t_new).contiguous(), true);
  const Variable tail = scaled_dot_product_attention(tail_q, k, v, AttentionMask::causal(t_new, past)).output;
  tail.backward(up);
  BOOST_TEST(max_abs_diff(tail.value(), full.value().narrow(2, past, t_new)) < 1e-12);
  BOOST_TEST(max_abs_diff(tail_q.grad(), dq) < 1e-12);
  BOOST_TEST(max_abs_diff(k.grad(), dk) < 1e-12);
  BOOST_TEST(max_abs_diff(v.grad(), dv) < 1e-12);
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(tail_q, k, v, AttentionMask::causal(t_new, past - 1)),
                       std::invalid_argument, "scaled_dot_product_attention", "causal(3, offset=3)", "(1, 1, 3, 6)",
                       "(2, 2, 3, 7)");
}

BOOST_AUTO_TEST_CASE(attention_fully_masked_row_is_zero_with_zero_finite_gradients) {
  const Variable q = testing::randn_leaf({2, 2, 3, 4}, 21), k = testing::randn_leaf({2, 2, 5, 4}, 22);
  const Variable v = testing::randn_leaf({2, 2, 5, 3}, 23);
  const Variable bias = testing::randn_leaf({3, 5}, 24, "bias");
  Tensor pattern = ones({2, 1, 3, 5}, DType::f64);
  for (int64_t j = 0; j < 5; ++j) pattern.set({1, 0, 2, j}, 0.0);  // batch 1, query 2: no key at all
  for (int64_t j = 0; j < 5; ++j) pattern.set({0, 0, 0, j}, j == 4 ? 1.0 : 0.0);
  const AttentionMask keep = AttentionMask::keep(pattern);
  for (const bool training : {false, true}) {
    GeneratorStateGuard restore;
    AttentionOptions o;
    o.training = training;
    o.dropout = training ? 0.3 : 0.0;
    const AttentionResult r = scaled_dot_product_attention(q, k, v, keep, bias, o);
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t d = 0; d < 3; ++d) BOOST_TEST(r.output.value().at({1, h, 2, d}) == 0.0);
      for (int64_t j = 0; j < 5; ++j) BOOST_TEST(r.weights.at({1, h, 2, j}) == 0.0);
    }
    for (Variable l : {q, k, v, bias}) l.zero_grad();
    r.output.backward(ones({2, 2, 3, 3}, DType::f64));
    for (const Variable& l : {q, k, v, bias}) {
      for (double g : l.grad().to_vector()) BOOST_TEST(std::isfinite(g));
    }
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t d = 0; d < 4; ++d) BOOST_TEST(q.grad().at({1, h, 2, d}) == 0.0);
    }
    check_gradients(
        [&](const std::vector<Variable>& in) {
          return scaled_dot_product_attention(in[0], in[1], in[2], keep, in[3], o).output;
        },
        {q, k, v, bias});
  }
}

BOOST_AUTO_TEST_CASE(fused_ops_agree_between_f32_and_f64) {
  Generator gen(3);
  const Tensor q = normal({2, 2, 6, 8}, 0, 1, gen, DType::f64), k = normal({2, 2, 7, 8}, 0, 1, gen, DType::f64);
  const Tensor v = normal({2, 2, 7, 5}, 0, 1, gen, DType::f64), x = normal({4, 6, 8}, 0, 1, gen, DType::f64);
  const AttentionMask keep = AttentionMask::key_padding({7, 4}, 7);
  const auto attn = [&](DType t) {
    return scaled_dot_product_attention(Variable(q.to(t)), Variable(k.to(t)), Variable(v.to(t)), keep).output.value();
  };
  BOOST_TEST(max_abs_diff(attn(DType::f32), attn(DType::f64)) < 1e-5);
  const auto ln = [&](DType t) { return layer_norm(Variable(x.to(t)), Variable(), Variable(), 1).value(); };
  BOOST_TEST(max_abs_diff(ln(DType::f32), ln(DType::f64)) < 1e-5);
  const Indices targets({4, 6}, std::vector<int64_t>(24, 3));
  const auto ce = [&](DType t) { return cross_entropy(Variable(x.to(t)), targets).value(); };
  BOOST_TEST(max_abs_diff(ce(DType::f32), ce(DType::f64)) < 1e-5);
}

BOOST_AUTO_TEST_CASE(attention_rejects_mismatched_shapes_naming_all_of_them) {
  const Variable q(zeros({2, 3, 4, 8}, DType::f64)), k(zeros({2, 3, 6, 8}, DType::f64));
  const Variable v(zeros({2, 3, 6, 5}, DType::f64));
  const Variable k_bad_depth(zeros({2, 3, 6, 7}, DType::f64)), v_bad_len(zeros({2, 3, 5, 5}, DType::f64));
  const Variable k_bad_heads(zeros({2, 2, 6, 8}, DType::f64));
  const std::string op = "scaled_dot_product_attention";
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(q, k_bad_depth, v), std::invalid_argument, op, "Dk",
                       "q=(2, 3, 4, 8)", "k=(2, 3, 6, 7)", "v=(2, 3, 6, 5)");
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(q, k_bad_heads, v), std::invalid_argument, op, "heads",
                       "k=(2, 2, 6, 8)");
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v_bad_len), std::invalid_argument, op, "Tk",
                       "v=(2, 3, 5, 5)");
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, AttentionMask::keep(zeros({3, 6}))), std::invalid_argument, op, "(3, 6)",
                       "(2, 3, 4, 6)");
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {}, Variable(zeros({4, 5}, DType::f64))),
                       std::invalid_argument, op, "bias (4, 5)");
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(Variable(zeros({3, 4, 8}, DType::f64)), k, v),
                       std::invalid_argument, op, "4-D", "q=(3, 4, 8)");
  AttentionOptions bad;
  bad.dropout = 1.2;
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {}, Variable(), bad), std::invalid_argument, op,
                       "p=1.2");
}

// ---------------------------------------------------------------------------------------------
// linear_cross_entropy: the head and its loss in chunks

const Indices kLceTargets({2, 4}, {1, 3, 4, 0, 3, 2, 5, 1});  // 3 is ignored where asked

LinearCrossEntropyOptions lce_options(int64_t chunk, Reduction reduction, double smoothing, int64_t ignore) {
  LinearCrossEntropyOptions o;
  o.chunk_rows = chunk;
  o.reduction = reduction;
  o.label_smoothing = smoothing;
  o.ignore_index = ignore;
  return o;
}

BOOST_AUTO_TEST_CASE(linear_cross_entropy_gradcheck_on_h_and_weight_over_chunks) {
  for (const int64_t chunk : {1, 3, 8, 100}) {
    for (const Reduction reduction : {Reduction::mean, Reduction::sum}) {
      for (const double smoothing : {0.0, 0.2}) {
        BOOST_TEST_CONTEXT("chunk " << chunk << ", reduction " << static_cast<int>(reduction) << ", smoothing "
                                    << smoothing) {
          const LinearCrossEntropyOptions o = lce_options(chunk, reduction, smoothing, 3);
          const Variable h = testing::randn_leaf({2, 4, 5}, 41, "h");  // (B, T, d)
          const Variable w = testing::randn_leaf({6, 5}, 42, "weight");  // (V, d)
          check_gradients(
              [&](const std::vector<Variable>& in) { return linear_cross_entropy(in[0], in[1], kLceTargets, o); },
              {h, w});
        }
      }
    }
  }
  // A transposed (non-contiguous) h and weight.
  const Variable h = transposed_leaf({2, 4, 5}, 0, 1, 43);
  const Variable w = transposed_leaf({6, 5}, 0, 1, 44);
  check_gradients([&](const std::vector<Variable>& in) {
    return linear_cross_entropy(in[0], in[1], kLceTargets, lce_options(3, Reduction::mean, 0.0, -100));
  }, {h, w});
}

BOOST_AUTO_TEST_CASE(linear_cross_entropy_equals_the_head_then_the_loss) {
  // Chunks of 3 over 8 rows, with a tied-weight style second use of the weight so that its
  // gradient is accumulated into one already there.
  for (const int64_t chunk : {1, 3, 5}) {
    const Variable h1 = testing::randn_leaf({2, 4, 5}, 51), w1 = testing::randn_leaf({6, 5}, 52);
    const Variable h2 = testing::randn_leaf({2, 4, 5}, 51), w2 = testing::randn_leaf({6, 5}, 52);
    const CrossEntropyOptions whole{.ignore_index = 3, .label_smoothing = 0.1};
    const Variable a = cross_entropy(linear(h1, w1), kLceTargets, whole) + sum(w1 * w1);
    const Variable b = linear_cross_entropy(h2, w2, kLceTargets, lce_options(chunk, Reduction::mean, 0.1, 3)) +
                       sum(w2 * w2);
    a.backward();
    b.backward();
    BOOST_TEST(std::abs(a.item() - b.item()) <= 1e-12, "chunk " << chunk);
    BOOST_TEST(max_abs_diff(h1.grad(), h2.grad()) <= 1e-12, "chunk " << chunk);
    BOOST_TEST(max_abs_diff(w1.grad(), w2.grad()) <= 1e-12, "chunk " << chunk);
  }
  // One chunk is the same arithmetic: the same bits, in f32 too.
  const auto f32_leaf = [](const Shape& shape, uint64_t seed) { return testing::randn_leaf(shape, seed, "", DType::f32); };
  const Variable h1 = f32_leaf({3, 7, 16}, 53), w1 = f32_leaf({50, 16}, 54);
  const Variable h2 = f32_leaf({3, 7, 16}, 53), w2 = f32_leaf({50, 16}, 54);
  std::vector<int64_t> t(21);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int64_t>(Generator::bits(55, i) % 50);
  const Indices targets({3, 7}, t);
  const Variable a = cross_entropy(linear(h1, w1), targets);
  const Variable b = linear_cross_entropy(h2, w2, targets, {.chunk_rows = 21});
  a.backward();
  b.backward();
  BOOST_TEST(a.item() == b.item());
  BOOST_TEST(max_abs_diff(h1.grad(), h2.grad()) == 0.0);
  BOOST_TEST(max_abs_diff(w1.grad(), w2.grad()) == 0.0);
}

BOOST_AUTO_TEST_CASE(linear_cross_entropy_scales_its_gradients_by_the_results_and_serves_a_retained_graph) {
  // Forward computes the gradients for a result gradient of 1. A loss scaled before backward
  // (loss * 1/K under gradient accumulation) and a second backward through a retained graph
  // must still give the direct computation's gradients, over several chunks.
  for (const double factor : {0.37, -2.0}) {
    const Variable h1 = testing::randn_leaf({2, 4, 5}, 71), w1 = testing::randn_leaf({6, 5}, 72);
    const Variable h2 = testing::randn_leaf({2, 4, 5}, 71), w2 = testing::randn_leaf({6, 5}, 72);
    const Variable a = cross_entropy(linear(h1, w1), kLceTargets, {.ignore_index = 3}) * factor;
    const Variable b = linear_cross_entropy(h2, w2, kLceTargets, lce_options(3, Reduction::mean, 0.0, 3)) * factor;
    a.backward();
    b.backward();
    BOOST_TEST(max_abs_diff(h1.grad(), h2.grad()) <= 1e-12, "factor " << factor);
    BOOST_TEST(max_abs_diff(w1.grad(), w2.grad()) <= 1e-12, "factor " << factor);
  }
  const Variable h = testing::randn_leaf({2, 4, 5}, 73), w = testing::randn_leaf({6, 5}, 74);
  const Variable loss = linear_cross_entropy(h, w, kLceTargets, lce_options(3, Reduction::sum, 0.1, 3));
  loss.backward(Tensor(), /*retain_graph=*/true);
  const Tensor dh = h.grad().clone(), dw = w.grad().clone();
  loss.backward(full({}, 0.5, DType::f64), /*retain_graph=*/true);  // adds half of it again
  loss.backward();
  BOOST_TEST(max_abs_diff(h.grad(), kernels::affine(dh, 2.5, 0.0)) <= 1e-12);
  BOOST_TEST(max_abs_diff(w.grad(), kernels::affine(dw, 2.5, 0.0)) <= 1e-12);
  // Only the inputs that ask for a gradient get one (a frozen head, as in LoRA fine-tuning).
  const Variable frozen(testing::randn_leaf({6, 5}, 74).value(), /*requires_grad=*/false);
  const Variable h3 = testing::randn_leaf({2, 4, 5}, 73);
  linear_cross_entropy(h3, frozen, kLceTargets, lce_options(3, Reduction::sum, 0.1, 3)).backward();
  BOOST_TEST(max_abs_diff(h3.grad(), dh) == 0.0);
  BOOST_TEST(!frozen.grad().defined());
}

BOOST_AUTO_TEST_CASE(linear_cross_entropy_with_nothing_to_score_has_zero_gradients) {
  // Every target ignored (mean and sum) and no rows at all: the loss is 0 and the gradients,
  // which forward prepares before any chunk, are zeros rather than uninitialised memory.
  const Indices ignored({2, 4}, std::vector<int64_t>(8, -100));
  for (const Reduction reduction : {Reduction::mean, Reduction::sum}) {
    const Variable h = testing::randn_leaf({2, 4, 5}, 91), w = testing::randn_leaf({6, 5}, 92);
    const Variable loss = linear_cross_entropy(h, w, ignored, lce_options(3, reduction, 0.1, -100));
    loss.backward();
    BOOST_TEST(loss.item() == 0.0);
    BOOST_TEST(max_abs_diff(h.grad(), zeros({2, 4, 5}, DType::f64)) == 0.0);
    BOOST_TEST(max_abs_diff(w.grad(), zeros({6, 5}, DType::f64)) == 0.0);
  }
  const Variable h = testing::randn_leaf({0, 5}, 93), w = testing::randn_leaf({6, 5}, 94);
  const Variable loss = linear_cross_entropy(h, w, Indices({0}, {}), lce_options(3, Reduction::sum, 0.0, -100));
  loss.backward();
  BOOST_TEST(loss.item() == 0.0);
  BOOST_TEST(h.grad().numel() == 0);
  BOOST_TEST(max_abs_diff(w.grad(), zeros({6, 5}, DType::f64)) == 0.0);
}

BOOST_AUTO_TEST_CASE(linear_cross_entropy_backward_builds_no_logits) {
  // 64 rows over a 20,000-word vocabulary in f64: a chunk's logits are 10 MB. Forward has
  // already turned them into the gradients, so backward only hands dh and dW over: it
  // allocates nothing of the logits' size (rebuilding them would take 20 MB, logits and their
  // gradient), and a first gradient is the op's own tensor, not a copy.
  constexpr int64_t rows = 64, vocab = 20000, d = 8;
  const Variable h = testing::randn_leaf({rows, d}, 81), w = testing::randn_leaf({vocab, d}, 82);
  std::vector<int64_t> t(rows);
  for (int64_t i = 0; i < rows; ++i) t[static_cast<size_t>(i)] = static_cast<int64_t>(Generator::bits(83, i) % vocab);
  const Indices targets({rows}, t);
  const Variable loss = linear_cross_entropy(h, w, targets, {.chunk_rows = rows});
  const std::size_t before = memory_stats().live;
  reset_peak_memory_stats();
  loss.backward();
  const std::size_t logits_bytes = static_cast<std::size_t>(rows * vocab) * sizeof(double);
  BOOST_TEST(memory_stats().peak_live - before < logits_bytes / 10);
  // The gradients are still the direct computation's.
  const Variable h2 = testing::randn_leaf({rows, d}, 81), w2 = testing::randn_leaf({vocab, d}, 82);
  cross_entropy(linear(h2, w2), targets).backward();
  BOOST_TEST(max_abs_diff(h.grad(), h2.grad()) == 0.0);
  BOOST_TEST(max_abs_diff(w.grad(), w2.grad()) == 0.0);
}

BOOST_AUTO_TEST_CASE(linear_cross_entropy_chunks_are_whole_multiples_of_96_rows) {
  // 16M values of GPT-2's 50,257 logits are 333 rows: 288 of them, so that products cut for
  // two threads at 12 or 48 rows give each an equal half. Under 96 rows, as many as fit.
  BOOST_TEST(linear_cross_entropy_chunk(50257) == 288);
  BOOST_TEST(linear_cross_entropy_chunk(6000) == 2784);
  BOOST_TEST(linear_cross_entropy_chunk(50257, int64_t{50257} * 95) == 95);
  BOOST_TEST(linear_cross_entropy_chunk(50257, 10) == 1);  // at least one row
}

BOOST_AUTO_TEST_CASE(linear_cross_entropy_refuses_bad_input_by_name) {
  const Variable h = testing::randn_leaf({2, 4, 5}, 61), w = testing::randn_leaf({6, 5}, 62);
  AG_CHECK_THROWS_WITH(linear_cross_entropy(h, w, kLceTargets, {.reduction = Reduction::none}), std::invalid_argument,
                       "linear_cross_entropy", "none");
  AG_CHECK_THROWS_WITH(linear_cross_entropy(h, w, kLceTargets, {.chunk_rows = 0}), std::invalid_argument,
                       "linear_cross_entropy", "chunk_rows", "got 0");
  AG_CHECK_THROWS_WITH(linear_cross_entropy(h, w, Indices({2, 4}, {1, 3, 4, 0, 3, 2, 6, 1})), std::invalid_argument,
                       "linear_cross_entropy", "target 6", "position 6", "[0, 6)");
  AG_CHECK_THROWS_WITH(linear_cross_entropy(h, testing::randn_leaf({6, 4}, 63), kLceTargets), std::invalid_argument,
                       "linear_cross_entropy", "(6, 4)", "(2, 4, 5)");
  AG_CHECK_THROWS_WITH(linear_cross_entropy(h, w, Indices({8}, {1, 3, 4, 0, 3, 2, 5, 1})), std::invalid_argument,
                       "linear_cross_entropy", "targets must have");
  AG_CHECK_THROWS_WITH(linear_cross_entropy(h, testing::randn_leaf({6, 5}, 64, "", DType::f32), kLceTargets),
                       std::invalid_argument, "linear_cross_entropy", "dtypes differ");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag
