// int8 weight-only quantization (core/quantize.h): each value within half its block's step,
// zero blocks, the partial last block, and the product quantized_linear against a double-precision
// product with the dequantized weights, on both of its paths (direct for a few rows of x, tiles
// and gemm for more), with the same bits for one thread and two.
#include <cmath>
#include <cstring>
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

// (out, in) shapes: in a multiple of 32, not one, below 32, a single row.
const std::vector<std::pair<int64_t, int64_t>> kShapes{{7, 64}, {5, 70}, {9, 13}, {1, 33}, {37, 96}, {130, 200}};

BOOST_AUTO_TEST_SUITE(quantize)


BOOST_AUTO_TEST_CASE(each_value_is_within_half_a_step_of_its_block) {
  for (const auto& [out, in] : kShapes) {
    const Tensor w = random_f32({out, in}, 11 + static_cast<uint64_t>(in));
    const QuantizedMatrix q = quantize_int8(w);
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
  const QuantizedMatrix q = quantize_int8(w);
  BOOST_TEST(q.scales[static_cast<size_t>(1 * 3 + 1)] == 0.0f);
  for (int64_t b = 0; b < 3; ++b) BOOST_TEST(q.scales[static_cast<size_t>(2 * 3 + b)] == 0.0f);
  const std::vector<double> vd = dequantize(q).to_vector();
  for (int64_t k = 32; k < 64; ++k) BOOST_TEST(vd[static_cast<size_t>(70 + k)] == 0.0);
  for (int64_t k = 0; k < 70; ++k) BOOST_TEST(vd[static_cast<size_t>(140 + k)] == 0.0);
  BOOST_TEST(q.scales[0] > 0.0f);
}

BOOST_AUTO_TEST_CASE(quantizing_the_dequantized_matrix_gives_it_back) {
  const Tensor w = random_f32({6, 77}, 3);
  const QuantizedMatrix q = quantize_int8(w);
  const QuantizedMatrix again = quantize_int8(dequantize(q));
  BOOST_TEST(again.values == q.values);
  BOOST_TEST(max_abs_diff(dequantize(again), dequantize(q)) <= 1e-7);
  // A strided view quantizes as its contiguous copy.
  const QuantizedMatrix from_view = quantize_int8(w.t().contiguous().t());
  BOOST_TEST(from_view.values == q.values);
}

BOOST_AUTO_TEST_CASE(bad_weights_are_refused) {
  AG_CHECK_THROWS_WITH(quantize_int8(random_f32({2, 3, 4}, 1)), std::invalid_argument, "quantize (int8)", "(2, 3, 4)");
  AG_CHECK_THROWS_WITH(quantize_int8(random_f32({2, 3}, 1).to(DType::f64)), std::invalid_argument, "float32", "f64");
  Tensor w = random_f32({2, 40}, 1);
  w.data<float>()[40 + 35] = NAN;
  AG_CHECK_THROWS_WITH(quantize_int8(w), std::invalid_argument, "(1, 35)", "finite");
  const QuantizedMatrix q = quantize_int8(random_f32({4, 8}, 2));
  AG_CHECK_THROWS_WITH(kernels::quantized_linear(random_f32({2, 9}, 3), q), std::invalid_argument, "quantized_linear", "(2, 9)",
                       "(4, 8)");
  AG_CHECK_THROWS_WITH(kernels::quantized_linear(random_f32({2, 8}, 3), q, random_f32({5}, 4)), std::invalid_argument,
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
        const QuantizedMatrix q = quantize_int8(w);
        const std::vector<double> want = reference_product(x, dequantize(q), bias);
        Tensor one, two;
        {
          ThreadCount threads(1);
          one = kernels::quantized_linear(x, q, bias);
        }
        {
          ThreadCount threads(2);
          detail::force_excess(0);
          two = kernels::quantized_linear(x, q, bias);
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
  const QuantizedMatrix q = quantize_int8(w);
  const Tensor x = random_f32({2, 3, 48}, 9);
  const Tensor y = kernels::quantized_linear(x, q);
  BOOST_TEST(y.shape() == (Shape{2, 3, 10}));
  BOOST_TEST(max_abs_diff(y.view({6, 10}), kernels::quantized_linear(x.view({6, 48}), q)) == 0.0);
  // A transposed (non-contiguous) x reads as its contiguous copy.
  const Tensor xt = random_f32({48, 4}, 10).t();
  BOOST_TEST(max_abs_diff(kernels::quantized_linear(xt, q), kernels::quantized_linear(xt.contiguous(), q)) == 0.0);
}

// Big enough for the pool to split it (kParallelMinWork) even at m = 1: over rows of W (m <= 8)
// and over tiles (m > 8), on two threads with a chunk each and with kChunksPerThread chunks each.
BOOST_AUTO_TEST_CASE(large_products_are_split_and_keep_their_bits) {
  const int64_t out = 600, in = 520;
  const QuantizedMatrix q = quantize_int8(random_f32({out, in}, 21));
  for (const int64_t m : {int64_t{1}, int64_t{8}, int64_t{9}, int64_t{33}}) {
    const Tensor x = random_f32({m, in}, 22 + static_cast<uint64_t>(m));
    const double work = 2.0 * static_cast<double>(m * out * in);
    Tensor one;
    {
      ThreadCount threads(1);
      one = kernels::quantized_linear(x, q);
    }
    for (const int busy : {0, 1}) {
      ThreadCount threads(busy ? 3 : 2);  // a busy machine: 3 threads, one without a core
      detail::force_excess(busy);
      BOOST_TEST(parallel_chunks(out, work) > 1);
      const Tensor split = kernels::quantized_linear(x, q);
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

// ---- q4_0 ----
//
// The block layout is held byte for byte to a writer written here from the format's definition
// (the comment at the top of core/quantize.h), with the compiler's own _Float16 for the half;
// the product's direct path to double precision with the dequantized weights and x rounded by
// the int8 rule written here; its tile path to double precision with the dequantized weights.
BOOST_AUTO_TEST_SUITE(q4_0_weights)

uint16_t half_bits(float value) {
  const _Float16 h = static_cast<_Float16>(value);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

// One row's blocks as the definition reads: the value of largest magnitude (the first of
// equals), d = it / -8 stored as a half, nibble min(15, floor(w * (1 / d) + 8.5)), low nibbles
// values 0..15, high nibbles 16..31, zeros past the row's end.
std::vector<uint8_t> reference_q4_row(const float* v, int64_t cols) {
  std::vector<uint8_t> out;
  for (int64_t k0 = 0; k0 < cols; k0 += 32) {
    float extreme = 0;
    for (int64_t k = k0; k < std::min(k0 + 32, cols); ++k) {
      if (std::fabs(v[k]) > std::fabs(extreme)) extreme = v[k];
    }
    const float d = extreme / -8.0f;
    const float inverse = d == 0.0f ? 0.0f : 1.0f / d;
    const uint16_t h = half_bits(d);
    out.push_back(static_cast<uint8_t>(h & 0xFF));
    out.push_back(static_cast<uint8_t>(h >> 8));
    uint8_t nibbles[32];
    for (int64_t j = 0; j < 32; ++j) {
      const float w = k0 + j < cols ? v[k0 + j] : 0.0f;
      nibbles[j] = static_cast<uint8_t>(std::min(15.0f, std::floor(w * inverse + 8.5f)));
    }
    for (int j = 0; j < 16; ++j) out.push_back(static_cast<uint8_t>(nibbles[j] | (nibbles[j + 16] << 4)));
  }
  return out;
}

BOOST_AUTO_TEST_CASE(halves_convert_as_the_compiler_converts_them) {
  // Every half to float and back, against _Float16 (NaNs: still NaN).
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    _Float16 h;
    const uint16_t b = static_cast<uint16_t>(bits);
    std::memcpy(&h, &b, sizeof b);
    const float want = static_cast<float>(h);
    const float got = half_to_float(b);
    if (std::isnan(want)) {
      BOOST_TEST(std::isnan(got));
      BOOST_TEST(std::isnan(half_to_float(float_to_half(got))));
      continue;
    }
    BOOST_TEST(std::memcmp(&got, &want, sizeof got) == 0, "half " << std::hex << bits);
    BOOST_TEST(float_to_half(got) == b, "half " << std::hex << bits);
  }
  // Floats between halves (ties included), past the largest, and below the smallest subnormal.
  Generator gen(4);
  const std::vector<double> spread = normal({20000}, 0.0, 1.0, gen, DType::f64).to_vector();
  std::vector<float> probes{65504.0f, 65519.99f, 65520.0f, 1e9f, 2.9802322e-8f, 2.9802326e-8f, 5.9604645e-8f * 1.5f,
                            6.1035156e-5f * (1 - 1.0f / 4096), 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 0.0f, -0.0f};
  for (const double x : spread) probes.push_back(static_cast<float>(std::ldexp(x, static_cast<int>(std::lround(x * 12)))));
  for (const float p : probes) {
    BOOST_TEST(float_to_half(p) == half_bits(p), p);
    BOOST_TEST(float_to_half(-p) == half_bits(-p), -p);
  }
}

BOOST_AUTO_TEST_CASE(blocks_are_the_formats_bytes) {
  for (const auto& [out, in] : kShapes) {
    Tensor w = random_f32({out, in}, 51 + static_cast<uint64_t>(in), 0.05);
    float* pw = w.data<float>();
    if (in >= 32) for (int64_t k = 0; k < 32; ++k) pw[k] = 0.0f;  // an all-zero block: d -0, nibbles 8
    if (out > 1) {
      pw[(out - 1) * in + 3] = 0.5f;   // a block led by a positive value...
      pw[(out - 1) * in + 4] = -0.5f;  // ...tied by a negative one after it
    }
    const QuantizedMatrix q = quantize_q4_0(w);
    BOOST_TEST(std::string(format_name(q.format)) == "q4_0");
    BOOST_TEST(q.packed.size() == static_cast<size_t>(out * ((in + 31) / 32) * 18));
    BOOST_TEST(q.values.empty());
    std::vector<uint8_t> want;
    for (int64_t r = 0; r < out; ++r) {
      const std::vector<uint8_t> row = reference_q4_row(pw + r * in, in);
      want.insert(want.end(), row.begin(), row.end());
    }
    BOOST_TEST(q.packed == want, out << "x" << in);
    if (in >= 32) {
      // d = 0 / -8 is -0: the half 0x8000, little-endian
      for (int j = 0; j < 18; ++j) BOOST_TEST(q.packed[static_cast<size_t>(j)] == (j == 0 ? 0 : j == 1 ? 0x80 : 0x88));
    }
  }
}

// Each value comes back within half a step (d / 2, d read back from its half, plus what d's
// rounding to a half moves it: up to 8 |d - half(d)|), except values of the other sign than the
// block's extreme past 7.5 d, which clip to 7 d; the extreme itself comes back as 8 half(d).
BOOST_AUTO_TEST_CASE(each_value_is_within_half_a_step_or_clipped) {
  for (const auto& [out, in] : kShapes) {
    const Tensor w = random_f32({out, in}, 61 + static_cast<uint64_t>(in));
    const QuantizedMatrix q = quantize_q4_0(w);
    const std::vector<double> vw = w.to_vector(), vd = dequantize(q).to_vector();
    for (int64_t r = 0; r < out; ++r) {
      for (int64_t k0 = 0; k0 < in; k0 += 32) {
        const uint8_t* block = q.packed.data() + (r * q.blocks() + k0 / 32) * 18;
        const double d = half_to_float(static_cast<uint16_t>(block[0] | (block[1] << 8)));
        double extreme = 0;
        for (int64_t k = k0; k < std::min(k0 + 32, in); ++k) {
          if (std::abs(vw[static_cast<size_t>(r * in + k)]) > std::abs(extreme)) extreme = vw[static_cast<size_t>(r * in + k)];
        }
        const double d_exact = extreme / -8;
        BOOST_TEST(std::abs(d - d_exact) <= std::abs(d_exact) / 2048 * (1 + 1e-6));
        for (int64_t k = k0; k < std::min(k0 + 32, in); ++k) {
          const size_t i = static_cast<size_t>(r * in + k);
          if (vw[i] == extreme) {
            BOOST_TEST(vd[i] == -8 * d);
          } else if (vw[i] / d_exact > 7.5) {
            BOOST_TEST(vd[i] == 7 * d, "(" << r << ", " << k << ") clips");
          } else {
            const double bound = std::abs(d_exact) / 2 * (1 + 1e-5) + 8 * std::abs(d - d_exact);
            BOOST_TEST(std::abs(vd[i] - vw[i]) <= bound, "(" << r << ", " << k << ") of " << out << "x" << in);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_weights_are_refused) {
  AG_CHECK_THROWS_WITH(quantize_q4_0(random_f32({2, 3, 4}, 1)), std::invalid_argument, "quantize (q4_0)", "(2, 3, 4)");
  Tensor w = random_f32({2, 40}, 1);
  w.data<float>()[40 + 35] = INFINITY;
  AG_CHECK_THROWS_WITH(quantize_q4_0(w), std::invalid_argument, "q4_0", "(1, 35)", "finite");
  Tensor big = random_f32({2, 40}, 1);
  big.data<float>()[40 + 2] = 6e5f;  // d = 75000: past a half
  AG_CHECK_THROWS_WITH(quantize_q4_0(big), std::invalid_argument, "q4_0", "row 1", "columns 0..31", "65504");
  big.data<float>()[40 + 2] = 5e5f;  // d = 62500: a half holds it
  BOOST_TEST(quantize_q4_0(big).rows == 2);
  const QuantizedMatrix q = quantize_q4_0(random_f32({4, 40}, 2));
  AG_CHECK_THROWS_WITH(kernels::quantized_linear(random_f32({2, 9}, 3), q), std::invalid_argument, "quantized_linear",
                       "q4_0", "(2, 9)", "(4, 40)");
  BOOST_TEST(format_name(parse_weight_format("q4_0")) == std::string("q4_0"));
  AG_CHECK_THROWS_WITH(parse_weight_format("q4"), std::invalid_argument, "'q4'", "int8, q4_0");
}

// x's rows rounded as the direct path rounds them (int8, blocks of 32, scale max|x| / 127, ties
// to even), as doubles; and the scales.
std::vector<double> rounded_x(const Tensor& x, int64_t in, std::vector<double>& scales) {
  std::vector<float> v(static_cast<size_t>(x.numel()));
  const std::vector<double> vx = x.contiguous().to_vector();
  std::vector<double> out(vx.size());
  scales.clear();
  for (size_t row = 0; row * static_cast<size_t>(in) < vx.size(); ++row) {
    for (int64_t k0 = 0; k0 < in; k0 += 32) {
      float amax = 0;
      for (int64_t k = k0; k < std::min(k0 + 32, in); ++k) amax = std::max(amax, std::fabs(static_cast<float>(vx[row * in + k])));
      const float s = amax / 127.0f;
      scales.push_back(s);
      for (int64_t k = k0; k < std::min(k0 + 32, in); ++k) {
        const float xv = static_cast<float>(vx[row * in + k]);
        out[row * in + k] = s == 0.0f ? 0.0 : static_cast<double>(std::nearbyint(xv / s)) * s;
      }
    }
  }
  return out;
}

// Both paths (m = 1, 3: direct, x rounded; m = 12, 40: tiles and gemm, x as it is), with and
// without bias, against double precision; one and two threads give the same bits. The direct
// path is also held to the unrounded product within what x's rounding can move it.
BOOST_AUTO_TEST_CASE(product_matches_double_precision_with_dequantized_weights) {
  for (const auto& [out, in] : kShapes) {
    for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{12}, int64_t{40}}) {
      for (const bool with_bias : {false, true}) {
        const uint64_t seed = static_cast<uint64_t>(out * 1000 + in * 10 + m);
        const Tensor w = random_f32({out, in}, seed);
        const Tensor x = random_f32({m, in}, seed + 1);
        const Tensor bias = with_bias ? random_f32({out}, seed + 2) : Tensor();
        const QuantizedMatrix q = quantize_q4_0(w);
        const Tensor wd = dequantize(q);
        const bool direct = m <= kQuantizedDirectRows;
        std::vector<double> scales;
        const Tensor xr = direct ? from_vector(rounded_x(x, in, scales), {m, in}, DType::f64) : x;
        const std::vector<double> want = reference_product(xr, wd, bias);
        const std::vector<double> exact = reference_product(x, wd, bias);
        Tensor one, two;
        {
          ThreadCount threads(1);
          one = kernels::quantized_linear(x, q, bias);
        }
        {
          ThreadCount threads(2);
          MachineLoad quiet(0);
          two = kernels::quantized_linear(x, q, bias);
        }
        BOOST_TEST(one.shape() == (Shape{m, out}));
        const std::vector<double> got = one.to_vector(), vwd = wd.to_vector();
        const double tol = 1e-5 * std::sqrt(static_cast<double>(in)) * 4;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t r = 0; r < out; ++r) {
            const size_t e = static_cast<size_t>(i * out + r);
            BOOST_TEST(std::abs(got[e] - want[e]) <= tol, out << "x" << in << " m=" << m << " (" << i << ", " << r
                                                                << "): " << got[e] << " vs " << want[e]);
            if (!direct) continue;
            double moved = 0;  // sum |w| * x's scale / 2 over the row's blocks
            for (int64_t k = 0; k < in; ++k) {
              moved += std::abs(vwd[static_cast<size_t>(r * in + k)]) * scales[static_cast<size_t>(i * q.blocks() + k / 32)] / 2;
            }
            BOOST_TEST(std::abs(got[e] - exact[e]) <= moved + tol);
          }
        }
        BOOST_TEST(max_abs_diff(one, two) == 0.0, out << "x" << in << " m=" << m << ": 1 and 2 threads differ");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_non_finite_x_gives_nan_not_a_number_from_the_other_values) {
  const QuantizedMatrix q = quantize_q4_0(random_f32({5, 64}, 7));
  for (const float bad : {NAN, INFINITY}) {
    Tensor x = random_f32({1, 64}, 8);
    x.data<float>()[40] = bad;
    const std::vector<double> y = kernels::quantized_linear(x, q).to_vector();
    for (const double v : y) BOOST_TEST(std::isnan(v));
  }
}

// Big enough for the pool to split it at m = 1, over rows of W and over tiles, with a chunk per
// thread and kChunksPerThread chunks each.
BOOST_AUTO_TEST_CASE(large_products_are_split_and_keep_their_bits) {
  const int64_t out = 600, in = 520;
  const QuantizedMatrix q = quantize_q4_0(random_f32({out, in}, 71));
  for (const int64_t m : {int64_t{1}, int64_t{8}, int64_t{9}}) {
    const Tensor x = random_f32({m, in}, 72 + static_cast<uint64_t>(m));
    const double work = 2.0 * static_cast<double>(m * out * in);
    Tensor one;
    {
      ThreadCount threads(1);
      one = kernels::quantized_linear(x, q);
    }
    for (const int busy : {0, 1}) {
      ThreadCount threads(busy ? 3 : 2);
      MachineLoad load(busy);
      BOOST_TEST(parallel_chunks(out, work) > 1);
      BOOST_TEST(max_abs_diff(one, kernels::quantized_linear(x, q)) == 0.0, "m=" << m << " busy=" << busy);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
