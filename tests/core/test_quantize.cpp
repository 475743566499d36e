// int8 weight-only quantization (core/quantize.h): each value within half its block's step,
// zero blocks, the partial last block, and the product int8_linear against a double-precision
// product with the dequantized weights, on both of its paths (direct for a few rows of x, tiles
// and gemm for more), with the same bits for one thread and two.
#include <cmath>
#include <vector>

#include "attograd/core/parallel.h"
#include "attograd/core/quantize.h"
#include "support.h"

namespace ag::testing {
namespace {

Tensor random_f32(const Shape& shape, uint64_t seed, double std = 1.0) {
  Generator gen(seed);
  return normal(shape, 0.0, std, gen, DType::f32);
}

// y = x W^T + b in double, W given as float values (the dequantized matrix).
std::vector<double> reference_product(const Tensor& x, const Tensor& w, const Tensor& bias) {
  const int64_t in = w.shape()[1], out = w.shape()[0], m = x.numel() / in;
  const std::vector<double> vx = x.contiguous().to_vector(), vw = w.contiguous().to_vector();
  const std::vector<double> vb = bias.defined() ? bias.to_vector() : std::vector<double>(static_cast<size_t>(out), 0.0);
  std::vector<double> y(static_cast<size_t>(m * out));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < out; ++r) {
      double s = vb[static_cast<size_t>(r)];
      for (int64_t k = 0; k < in; ++k) s += vx[static_cast<size_t>(i * in + k)] * vw[static_cast<size_t>(r * in + k)];
      y[static_cast<size_t>(i * out + r)] = s;
    }
  }
  return y;
}

BOOST_AUTO_TEST_SUITE(quantize)

// (out, in) shapes: in a multiple of 32, not one, below 32, a single row.
const std::vector<std::pair<int64_t, int64_t>> kShapes{{7, 64}, {5, 70}, {9, 13}, {1, 33}, {37, 96}, {130, 200}};

BOOST_AUTO_TEST_CASE(each_value_is_within_half_a_step_of_its_block) {
  for (const auto& [out, in] : kShapes) {
    const Tensor w = random_f32({out, in}, 11 + static_cast<uint64_t>(in));
    const Int8Matrix q = quantize_int8(w);
    BOOST_TEST(q.rows == out);
    BOOST_TEST(q.cols == in);
    BOOST_TEST(q.blocks() == (in + 31) / 32);
    const std::vector<double> vw = w.to_vector(), vd = dequantize(q).to_vector();
    for (int64_t r = 0; r < out; ++r) {
      for (int64_t b = 0; b < q.blocks(); ++b) {
        const int64_t k0 = b * 32, k1 = std::min(k0 + 32, in);
        double amax = 0;
        for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::abs(vw[static_cast<size_t>(r * in + k)]));
        const double scale = q.scales[static_cast<size_t>(r * q.blocks() + b)];
        BOOST_TEST(std::abs(scale - amax / 127) <= 1e-6 * amax);
        bool hits_127 = false;
        for (int64_t k = k0; k < k1; ++k) {
          const size_t i = static_cast<size_t>(r * in + k);
          BOOST_TEST(std::abs(vd[i] - vw[i]) <= scale / 2 * (1 + 1e-5), "(" << r << ", " << k << ") of " << out << "x" << in);
          BOOST_TEST(std::abs(static_cast<int>(q.values[i])) <= 127);
          hits_127 = hits_127 || std::abs(static_cast<int>(q.values[i])) == 127;
        }
        BOOST_TEST(hits_127, "the block's largest value maps to +-127");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(zero_blocks_have_zero_scale_and_values) {
  Tensor w = random_f32({3, 70}, 5);
  for (int64_t k = 32; k < 64; ++k) w.data<float>()[70 + k] = 0.0f;  // row 1, block 1
  for (int64_t k = 0; k < 70; ++k) w.data<float>()[140 + k] = 0.0f;  // row 2, every block
  const Int8Matrix q = quantize_int8(w);
  BOOST_TEST(q.scales[static_cast<size_t>(1 * 3 + 1)] == 0.0f);
  for (int64_t b = 0; b < 3; ++b) BOOST_TEST(q.scales[static_cast<size_t>(2 * 3 + b)] == 0.0f);
  const std::vector<double> vd = dequantize(q).to_vector();
  for (int64_t k = 32; k < 64; ++k) BOOST_TEST(vd[static_cast<size_t>(70 + k)] == 0.0);
  for (int64_t k = 0; k < 70; ++k) BOOST_TEST(vd[static_cast<size_t>(140 + k)] == 0.0);
  BOOST_TEST(q.scales[0] > 0.0f);
}

BOOST_AUTO_TEST_CASE(quantizing_the_dequantized_matrix_gives_it_back) {
  const Tensor w = random_f32({6, 77}, 3);
  const Int8Matrix q = quantize_int8(w);
  const Int8Matrix again = quantize_int8(dequantize(q));
  BOOST_TEST(again.values == q.values);
  BOOST_TEST(max_abs_diff(dequantize(again), dequantize(q)) <= 1e-7);
  // A strided view quantizes as its contiguous copy.
  const Int8Matrix from_view = quantize_int8(w.t().contiguous().t());
  BOOST_TEST(from_view.values == q.values);
}

BOOST_AUTO_TEST_CASE(bad_weights_are_refused) {
  AG_CHECK_THROWS_WITH(quantize_int8(random_f32({2, 3, 4}, 1)), std::invalid_argument, "quantize_int8", "(2, 3, 4)");
  AG_CHECK_THROWS_WITH(quantize_int8(random_f32({2, 3}, 1).to(DType::f64)), std::invalid_argument, "float32", "f64");
  Tensor w = random_f32({2, 40}, 1);
  w.data<float>()[40 + 35] = NAN;
  AG_CHECK_THROWS_WITH(quantize_int8(w), std::invalid_argument, "(1, 35)", "finite");
  const Int8Matrix q = quantize_int8(random_f32({4, 8}, 2));
  AG_CHECK_THROWS_WITH(kernels::int8_linear(random_f32({2, 9}, 3), q), std::invalid_argument, "int8_linear", "(2, 9)",
                       "(4, 8)");
  AG_CHECK_THROWS_WITH(kernels::int8_linear(random_f32({2, 8}, 3), q, random_f32({5}, 4)), std::invalid_argument,
                       "bias (5,)");
}

// The product on both paths (m = 1, 3: direct; m = 12, 40: tiles and gemm), with and without
// bias, against double precision with the dequantized weights; one and two threads give the
// same bits.
BOOST_AUTO_TEST_CASE(product_matches_double_precision_with_dequantized_weights) {
  for (const auto& [out, in] : kShapes) {
    for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{12}, int64_t{40}}) {
      for (const bool with_bias : {false, true}) {
        const uint64_t seed = static_cast<uint64_t>(out * 1000 + in * 10 + m);
        const Tensor w = random_f32({out, in}, seed);
        const Tensor x = random_f32({m, in}, seed + 1);
        const Tensor bias = with_bias ? random_f32({out}, seed + 2) : Tensor();
        const Int8Matrix q = quantize_int8(w);
        const std::vector<double> want = reference_product(x, dequantize(q), bias);
        Tensor one, two;
        {
          ThreadCount threads(1);
          one = kernels::int8_linear(x, q, bias);
        }
        {
          ThreadCount threads(2);
          detail::force_excess(0);
          two = kernels::int8_linear(x, q, bias);
          detail::force_excess(-1);
        }
        BOOST_TEST(one.shape() == (Shape{m, out}));
        const std::vector<double> got = one.to_vector();
        // float32 sums of `in` products of size ~|x| |w|: a few ulps of sqrt(in) times that.
        const double tol = 1e-5 * std::sqrt(static_cast<double>(in)) * 4;
        for (size_t i = 0; i < got.size(); ++i) {
          BOOST_TEST(std::abs(got[i] - want[i]) <= tol, out << "x" << in << " m=" << m << " element " << i << ": "
                                                             << got[i] << " vs " << want[i]);
        }
        BOOST_TEST(max_abs_diff(one, two) == 0.0, out << "x" << in << " m=" << m << ": 1 and 2 threads differ");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(leading_axes_fold_into_rows) {
  const Tensor w = random_f32({10, 48}, 8);
  const Int8Matrix q = quantize_int8(w);
  const Tensor x = random_f32({2, 3, 48}, 9);
  const Tensor y = kernels::int8_linear(x, q);
  BOOST_TEST(y.shape() == (Shape{2, 3, 10}));
  BOOST_TEST(max_abs_diff(y.view({6, 10}), kernels::int8_linear(x.view({6, 48}), q)) == 0.0);
  // A transposed (non-contiguous) x reads as its contiguous copy.
  const Tensor xt = random_f32({48, 4}, 10).t();
  BOOST_TEST(max_abs_diff(kernels::int8_linear(xt, q), kernels::int8_linear(xt.contiguous(), q)) == 0.0);
}

// Big enough for the pool to split it (kParallelMinWork) even at m = 1: over rows of W (m <= 8)
// and over tiles (m > 8), on two threads with a chunk each and with kChunksPerThread chunks each.
BOOST_AUTO_TEST_CASE(large_products_are_split_and_keep_their_bits) {
  const int64_t out = 600, in = 520;
  const Int8Matrix q = quantize_int8(random_f32({out, in}, 21));
  for (const int64_t m : {int64_t{1}, int64_t{8}, int64_t{9}, int64_t{33}}) {
    const Tensor x = random_f32({m, in}, 22 + static_cast<uint64_t>(m));
    const double work = 2.0 * static_cast<double>(m * out * in);
    Tensor one;
    {
      ThreadCount threads(1);
      one = kernels::int8_linear(x, q);
    }
    for (const int busy : {0, 1}) {
      ThreadCount threads(busy ? 3 : 2);  // a busy machine: 3 threads, one without a core
      detail::force_excess(busy);
      BOOST_TEST(parallel_chunks(out, work) > 1);
      const Tensor split = kernels::int8_linear(x, q);
      detail::force_excess(-1);
      BOOST_TEST(max_abs_diff(one, split) == 0.0, "m=" << m << " busy=" << busy);
    }
    const std::vector<double> want = reference_product(x, dequantize(q), Tensor());
    const std::vector<double> got = one.to_vector();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    BOOST_TEST(worst <= 1e-4, "m=" << m << ": " << worst);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
