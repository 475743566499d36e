// The ops of Llama-shaped models (autograd/nn_ops.h): rms_norm, rotary_embedding, silu and
// swiglu, and scaled_dot_product_attention with fewer key/value heads than query heads
// (grouped-query attention). Each: PyTorch reference values in float64 (reference_nn_ops.py),
// float64 gradient checks on inputs and weights (masked, non-contiguous and broadcast cases
// included), fused == composed twin (autograd/composed.h), and bad input.
#include <cmath>

#include "attograd/autograd/ops/kernels.h"
#include "nn_ops_support.h"
#include "reference_nn_ops.h"

namespace ag {
namespace {

using namespace testing;
namespace ref = testing::torch_reference;

// cos and sin of p * theta^(-2i/D) for p < positions, i < D/2: (positions, D/2) in f64, the
// way reference_nn_ops.py makes them.
std::pair<Tensor, Tensor> rotary_tables(int64_t positions, int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  Tensor c(Shape{positions, half}, DType::f64), s(Shape{positions, half}, DType::f64);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) / std::pow(theta, static_cast<double>(2 * i) / head_dim);
      c.set({p, i}, std::cos(angle));
      s.set({p, i}, std::sin(angle));
    }
  }
  return {c, s};
}

BOOST_AUTO_TEST_SUITE(llama_ops)

// ---------------------------------------------------------------------------------------------
// rms_norm

BOOST_AUTO_TEST_CASE(rms_norm_matches_pytorch) {
  const Variable x = leaf(wave({2, 3, 4}, 0.43, 0.2, 2.0, 0.3));
  const Variable w = leaf(wave({4}, 0.77, 0.5, 0.5, 1.0));
  const Variable y = rms_norm(x, w, 1e-6);
  y.backward(wave({2, 3, 4}, 0.31, 0.6));
  check_values(y.value(), ref::kRmsNormY, kTwinTol, "y");
  check_values(x.grad(), ref::kRmsNormDx, kTwinTol, "dx");
  check_values(w.grad(), ref::kRmsNormDweight, kTwinTol, "dweight");
}

BOOST_AUTO_TEST_CASE(rms_norm_gradchecks_and_equals_its_composition) {
  // Rows of one element, of 8-wide lane groups with and without a tail, and per-head rows of a
  // (B, T, H, D) tensor (Qwen3's q and k norms).
  const std::vector<Shape> shapes = {{4, 6}, {2, 3, 4}, {7}, {3, 1}, {3, 8}, {2, 19}, {2, 3, 2, 4}};
  uint64_t seed = 100;
  for (const Shape& shape : shapes) {
    for (const bool with_weight : {true, false}) {
      BOOST_TEST_CONTEXT("x " << shape << " weight " << with_weight) {
        const Variable x = randn_leaf(shape, ++seed, "x");
        const Variable w = with_weight ? leaf(wave({shape[-1]}, 0.7, 0.3, 0.5, 1.0), "weight") : Variable();
        GradcheckOptions opt;
        if (with_weight) opt.params.push_back(w);
        check_gradients([&](const std::vector<Variable>& in) { return rms_norm(in[0], w, 1e-5); }, {x}, opt);
        const std::vector<Variable> leaves = with_weight ? std::vector<Variable>{x, w} : std::vector<Variable>{x};
        check_twins([&] { return rms_norm(x, w, 1e-5); }, [&] { return composed::rms_norm(x, w, 1e-5); }, leaves,
                    wave(shape, 0.33, 0.2));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(rms_norm_reads_non_contiguous_input_and_many_row_blocks) {
  const Variable xt = transposed_leaf({3, 5, 4}, 0, 2, 7);
  BOOST_REQUIRE(!xt.value().is_contiguous());
  const Variable w = leaf(wave({4}, 0.5, 0.1, 0.4, 1.0), "weight");
  check_gradients([&](const std::vector<Variable>& in) { return rms_norm(in[0], in[1]); }, {xt, w});
  check_twins([&] { return rms_norm(xt, w); }, [&] { return composed::rms_norm(xt, w, 1e-6); }, {xt, w},
              wave({3, 5, 4}, 0.21, 0.5));
  // 3 * 17 rows of 700: several blocks of the weight gradient's column sums, the last one short.
  const Variable x = randn_leaf({3, 17, 700}, 8, "x");
  const Variable wide = leaf(wave({700}, 0.7, 0.3, 0.5, 1.0), "weight");
  check_twins([&] { return rms_norm(x, wide); }, [&] { return composed::rms_norm(x, wide, 1e-6); }, {x, wide},
              wave({3, 17, 700}, 0.33, 0.2));
}

BOOST_AUTO_TEST_CASE(rms_norm_gives_the_same_bits_on_one_and_two_threads) {
  const Variable x = randn_leaf({6, 33, 300}, 9, "x", DType::f32);
  Generator gen(3);
  const Variable w(normal({300}, 1.0, 0.1, gen, DType::f32), true, "w");
  const Tensor up = normal({6, 33, 300}, 0.0, 1.0, gen, DType::f32);
  std::vector<std::vector<Tensor>> runs;
  for (const int threads : {1, 2}) {
    ThreadCount guard(threads);
    runs.push_back(value_and_grads([&] { return rms_norm(x, w); }, {x, w}, up));
  }
  for (size_t i = 0; i < runs[0].size(); ++i) BOOST_TEST(max_abs_diff(runs[0][i], runs[1][i]) == 0.0);
}

BOOST_AUTO_TEST_CASE(rms_norm_rejects_bad_input) {
  const Variable x(zeros({2, 3, 4}, DType::f64));
  AG_CHECK_THROWS_WITH(rms_norm(x, Variable(zeros({3}, DType::f64))), std::invalid_argument, "rms_norm", "(3,)",
                       "(2, 3, 4)");
  AG_CHECK_THROWS_WITH(rms_norm(x, Variable(zeros({4}))), std::invalid_argument, "rms_norm", "f32", "f64");
  AG_CHECK_THROWS_WITH(rms_norm(x, Variable(), -1.0), std::invalid_argument, "rms_norm", "eps");
  AG_CHECK_THROWS_WITH(rms_norm(Variable(zeros({2, 0})), Variable()), std::invalid_argument, "rms_norm", "(2, 0)");
}

// ---------------------------------------------------------------------------------------------
// rotary_embedding

BOOST_AUTO_TEST_CASE(rotary_embedding_matches_pytorch_at_an_offset) {
  const auto [c, s] = rotary_tables(8, 4, 10000.0);
  const Variable x = leaf(wave({2, 3, 2, 4}, 0.29, 0.4));
  const Variable y = rotary_embedding(x, c, s, 5);
  y.backward(wave({2, 3, 2, 4}, 0.53, 0.9));
  check_values(y.value(), ref::kRotaryY, kTwinTol, "y");
  check_values(x.grad(), ref::kRotaryDx, kTwinTol, "dx");
}

BOOST_AUTO_TEST_CASE(rotary_embedding_gradchecks_and_equals_its_composition) {
  const auto [c, s] = rotary_tables(16, 6, 500.0);
  for (const int64_t offset : {int64_t{0}, int64_t{3}, int64_t{11}}) {
    BOOST_TEST_CONTEXT("offset " << offset) {
      const Variable x = randn_leaf({2, 5, 3, 6}, 20 + static_cast<uint64_t>(offset), "x");
      check_gradients([&](const std::vector<Variable>& in) { return rotary_embedding(in[0], c, s, offset); }, {x});
      check_twins([&] { return rotary_embedding(x, c, s, offset); },
                  [&] { return composed::rotary_embedding(x, c, s, offset); }, {x}, wave({2, 5, 3, 6}, 0.37, 0.1));
    }
  }
  // Heads permuted out of a (B, H, T, D) tensor: a strided view.
  const Variable xp = transposed_leaf({2, 5, 3, 6}, 1, 2, 31);
  BOOST_REQUIRE(!xp.value().is_contiguous());
  check_gradients([&](const std::vector<Variable>& in) { return rotary_embedding(in[0], c, s, 2); }, {xp});
  check_twins([&] { return rotary_embedding(xp, c, s, 2); }, [&] { return composed::rotary_embedding(xp, c, s, 2); },
              {xp}, wave({2, 5, 3, 6}, 0.17, 0.8));
}

// A rotation keeps each pair's length, and position 0 is the identity.
BOOST_AUTO_TEST_CASE(rotary_embedding_keeps_lengths_and_leaves_position_zero) {
  const auto [c, s] = rotary_tables(40, 8, 10000.0);
  Generator gen(5);
  const Variable x(normal({1, 40, 2, 8}, 0.0, 1.0, gen, DType::f64));
  const Tensor y = rotary_embedding(x, c, s).value();
  const Tensor x_sq = kernels::sum(kernels::mul(x.value(), x.value()), {-1});
  const Tensor y_sq = kernels::sum(kernels::mul(y, y), {-1});
  BOOST_TEST(max_abs_diff(x_sq, y_sq) < 1e-12);
  BOOST_TEST(max_abs_diff(x.value().narrow(1, 0, 1), y.narrow(1, 0, 1)) == 0.0);
  BOOST_TEST(max_abs_diff(x.value().narrow(1, 1, 1), y.narrow(1, 1, 1)) > 0.1);
}

BOOST_AUTO_TEST_CASE(rotary_embedding_rejects_bad_input) {
  const auto [c, s] = rotary_tables(8, 4, 10000.0);
  const Variable x(zeros({1, 3, 2, 4}, DType::f64));
  AG_CHECK_THROWS_WITH(rotary_embedding(x, c, s, 6), std::invalid_argument, "rotary_embedding", "6 .. 8",
                       "8 positions");
  AG_CHECK_THROWS_WITH(rotary_embedding(x, c, s, -1), std::invalid_argument, "rotary_embedding");
  AG_CHECK_THROWS_WITH(rotary_embedding(Variable(zeros({1, 3, 2, 5}, DType::f64)), c, s), std::invalid_argument,
                       "rotary_embedding", "even", "(1, 3, 2, 5)");
  AG_CHECK_THROWS_WITH(rotary_embedding(Variable(zeros({3, 2, 4}, DType::f64)), c, s), std::invalid_argument,
                       "rotary_embedding", "(B, T, H, D)");
  AG_CHECK_THROWS_WITH(rotary_embedding(Variable(zeros({1, 3, 2, 4})), c, s), std::invalid_argument,
                       "rotary_embedding", "f32");
  AG_CHECK_THROWS_WITH(rotary_embedding(Variable(zeros({1, 3, 2, 6}, DType::f64)), c, s), std::invalid_argument,
                       "rotary_embedding", "D/2 = 3");
}

// ---------------------------------------------------------------------------------------------
// silu and swiglu

BOOST_AUTO_TEST_CASE(silu_gradchecks_and_has_its_values) {
  const Variable x = randn_leaf({4, 5}, 40, "x");
  check_gradients([](const std::vector<Variable>& in) { return silu(in[0]); }, {x});
  const std::vector<double> xv = x.value().to_vector(), yv = silu(x).value().to_vector();
  for (size_t i = 0; i < xv.size(); ++i) BOOST_TEST(std::abs(yv[i] - xv[i] / (1 + std::exp(-xv[i]))) < 1e-15);
  // Far out: silu(-200) is -0 (exp overflows in f32) and silu(200) is 200, both finite.
  const std::vector<double> far = silu(Variable(from_vector(std::vector<double>{-200.0, 200.0}, Shape{2}, DType::f32))).value().to_vector();
  BOOST_TEST(far[0] == 0.0);
  BOOST_TEST(far[1] == 200.0);
}

BOOST_AUTO_TEST_CASE(swiglu_matches_pytorch_gradchecks_and_equals_its_composition) {
  const Variable gate = leaf(wave({3, 5}, 0.61, 0.2, 3.0));
  const Variable up = leaf(wave({3, 5}, 0.37, 0.8));
  const Variable y = swiglu(gate, up);
  y.backward(wave({3, 5}, 0.47, 0.1));
  check_values(y.value(), ref::kSwigluY, kTwinTol, "y");
  check_values(gate.grad(), ref::kSwigluDgate, kTwinTol, "dgate");
  check_values(up.grad(), ref::kSwigluDup, kTwinTol, "dup");
  const Variable g = randn_leaf({2, 3, 7}, 41, "gate"), u = randn_leaf({2, 3, 7}, 42, "up");
  check_gradients([](const std::vector<Variable>& in) { return swiglu(in[0], in[1]); }, {g, u});
  check_twins([&] { return swiglu(g, u); }, [&] { return composed::swiglu(g, u); }, {g, u},
              wave({2, 3, 7}, 0.29, 0.3));
  // Strided views: the halves of one (2, 3, 14) projection, as a fused gate-and-up layer gives.
  const Variable both = randn_leaf({2, 3, 14}, 43, "both");
  check_gradients(
      [](const std::vector<Variable>& in) { return swiglu(slice(in[0], -1, 0, 7), slice(in[0], -1, 7, 14)); }, {both});
}

BOOST_AUTO_TEST_CASE(swiglu_rejects_mismatched_operands) {
  const Variable a(zeros({2, 3}, DType::f64));
  AG_CHECK_THROWS_WITH(swiglu(a, Variable(zeros({3}, DType::f64))), std::invalid_argument, "swiglu", "(2, 3)", "(3,)");
  AG_CHECK_THROWS_WITH(swiglu(a, Variable(zeros({2, 3}))), std::invalid_argument, "swiglu", "f32");
}

// ---------------------------------------------------------------------------------------------
// grouped-query attention: k and v with fewer heads than q

BOOST_AUTO_TEST_CASE(grouped_attention_matches_pytorch) {
  const Variable q = leaf(wave({2, 4, 3, 4}, 0.31, 0.2));
  const Variable k = leaf(wave({2, 2, 3, 4}, 0.23, 0.9));
  const Variable v = leaf(wave({2, 2, 3, 3}, 0.17, 0.5));
  const Variable out = scaled_dot_product_attention(q, k, v, AttentionMask::causal(3)).output;
  out.backward(wave({2, 4, 3, 3}, 0.37, 1.1));
  check_values(out.value(), ref::kGroupedOut, kTwinTol, "out");
  check_values(q.grad(), ref::kGroupedDq, kTwinTol, "dq");
  check_values(k.grad(), ref::kGroupedDk, kTwinTol, "dk");
  check_values(v.grad(), ref::kGroupedDv, kTwinTol, "dv");
}

struct GroupedCase {
  int64_t H, Hkv;
  bool permuted;  // q, k, v as views of (B, T, H, D) tensors, the way the layers make them
  int mask;       // 0 none, 1 causal, 2 key padding and causal, 3 a keep pattern per head
  bool bias;
  double dropout;
};

BOOST_AUTO_TEST_CASE(grouped_attention_gradchecks_and_equals_its_composition) {
  const std::vector<GroupedCase> cases = {
      {4, 2, false, 1, false, 0.0}, {4, 1, false, 0, false, 0.0}, {6, 3, true, 1, false, 0.0},
      {4, 2, true, 2, true, 0.0},   {4, 2, false, 3, false, 0.0}, {4, 2, false, 1, false, 0.3},
      {2, 2, true, 1, false, 0.0},
  };
  const int64_t B = 2, T = 5, D = 3;
  uint64_t seed = 60;
  for (const GroupedCase& c : cases) {
    BOOST_TEST_CONTEXT("H " << c.H << " Hkv " << c.Hkv << " permuted " << c.permuted << " mask " << c.mask
                            << " bias " << c.bias << " dropout " << c.dropout) {
      const auto operand = [&](int64_t heads, const char* name) {
        return c.permuted ? transposed_leaf({B, heads, T, D}, 1, 2, ++seed) : randn_leaf({B, heads, T, D}, ++seed, name);
      };
      const Variable q = operand(c.H, "q"), k = operand(c.Hkv, "k"), v = operand(c.Hkv, "v");
      AttentionMask mask;
      if (c.mask == 1) mask = AttentionMask::causal(T);
      if (c.mask == 2) mask = AttentionMask::causal(T) & AttentionMask::key_padding({5, 3}, T);
      if (c.mask == 3) {
        Tensor keep = ones({c.H, T, T}, DType::f64);
        keep.set({1, 2, 0}, 0.0);
        keep.set({3, 4, 4}, 0.0);
        keep.set({0, 1, 1}, 0.0);
        mask = AttentionMask::keep_per_head(keep);
      }
      const Variable bias = c.bias ? leaf(wave({1, c.H, T, T}, 0.41, 0.6, 0.5), "bias") : Variable();
      AttentionOptions options;
      options.dropout = c.dropout;
      options.training = c.dropout > 0.0;
      std::vector<Variable> inputs{q, k, v};
      if (c.bias) inputs.push_back(bias);
      GeneratorStateGuard restore;
      manual_seed(7);
      check_gradients(
          [&](const std::vector<Variable>& in) {
            return scaled_dot_product_attention(in[0], in[1], in[2], mask, c.bias ? in[3] : Variable(), options).output;
          },
          inputs);
      // The twin copies k and v to every query head; dropout draws the same mask from the same state.
      const Tensor up = wave({B, c.H, T, D}, 0.27, 0.5);
      check_twins(
          [&] {
            manual_seed(9);
            return scaled_dot_product_attention(q, k, v, mask, bias, options).output;
          },
          [&] {
            manual_seed(9);
            return composed::scaled_dot_product_attention(q, k, v, mask, bias, options);
          },
          inputs, up);
    }
  }
}

// The group's dK and dV sums run in a fixed order: BLAS and the direct loops agree, and one and
// two threads give the same bits.
BOOST_AUTO_TEST_CASE(grouped_attention_paths_and_threads_agree) {
  Generator gen(70);
  const Tensor q = normal({2, 8, 40, 16}, 0.0, 1.0, gen, DType::f32);
  const Tensor k = normal({2, 2, 40, 16}, 0.0, 1.0, gen, DType::f32);
  const Tensor v = normal({2, 2, 40, 16}, 0.0, 1.0, gen, DType::f32);
  const Tensor g = normal({2, 8, 40, 16}, 0.0, 1.0, gen, DType::f32);
  const AttentionMask mask = AttentionMask::causal(40);
  const auto run = [&](kernels::AttentionPath path) {
    const kernels::AttentionForward f = kernels::attention_forward(q, k, v, mask, Tensor(), 0.25, {}, path);
    kernels::AttentionGrads d = kernels::attention_backward(g, q, k, v, mask, Tensor(), f.row_max, f.row_sum, 0.25,
                                                            {}, true, true, true, false, path);
    return std::vector<Tensor>{f.output, d.dq, d.dk, d.dv};
  };
  const std::vector<Tensor> blas = run(kernels::AttentionPath::blas), direct = run(kernels::AttentionPath::direct);
  for (size_t i = 0; i < blas.size(); ++i) BOOST_TEST(max_abs_diff(blas[i], direct[i]) < 5e-5);
  std::vector<Tensor> one, two;
  {
    ThreadCount guard(1);
    one = run(kernels::AttentionPath::automatic);
  }
  {
    ThreadCount guard(2);
    two = run(kernels::AttentionPath::automatic);
  }
  for (size_t i = 0; i < one.size(); ++i) BOOST_TEST(max_abs_diff(one[i], two[i]) == 0.0);
  BOOST_TEST(one[2].shape() == (Shape{2, 2, 40, 16}));
}

BOOST_AUTO_TEST_CASE(grouped_attention_rejects_heads_that_do_not_divide) {
  const Variable q(zeros({1, 4, 3, 2}, DType::f64));
  const Variable k3(zeros({1, 3, 3, 2}, DType::f64)), k2(zeros({1, 2, 3, 2}, DType::f64));
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(q, k3, k3), std::invalid_argument, "scaled_dot_product_attention",
                       "H = 4", "k=(1, 3, 3, 2)");
  AG_CHECK_THROWS_WITH(scaled_dot_product_attention(q, k2, k3), std::invalid_argument, "same number of heads");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag
