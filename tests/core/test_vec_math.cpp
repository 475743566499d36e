// core/vec_math.h: exp_f32 and erf_f32 against exp and erf in double over sweeps of the float
// range and at the special values, the row loops (exp_shifted, the lane reductions) against
// their scalar definitions, the kernels calling them (softmax, cross entropy, GELU) in f32
// against the same kernels in f64, and small_gemm against a plain double-precision product (its
// baseline and AVX2 copies bit for bit).
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"
#include "attograd/core/vec_math.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

// Position of a float on the number line in ulps (monotonic across zero, +0 and -0 equal).
int64_t ulp_index(float f) {
  const int32_t bits = std::bit_cast<int32_t>(f);
  return bits < 0 ? -static_cast<int64_t>(bits & 0x7fffffff) : static_cast<int64_t>(bits);
}

// The correctly rounded float exp (double's exp is accurate to far below a float ulp).
float reference_exp(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }

// One call at a time, kept out of line so that the test compares the vectorised loop below
// with scalar code.
[[gnu::noinline]] float exp_one(float x) { return exp_f32(x); }

BOOST_AUTO_TEST_SUITE(float_exp)

// Every 127th bit pattern of each sign (about 34 million inputs, all binades, subnormal inputs
// and results included; NaN patterns excluded, see below). A sweep of all 2^32 patterns gave a
// maximum error of 1 ulp when this was written; the bound checked here is that.
BOOST_AUTO_TEST_CASE(exp_f32_is_within_one_ulp_over_the_float_range) {
  constexpr uint32_t kStride = 127;
  constexpr uint32_t kInf = 0x7f800000u;
  int64_t worst = 0;
  float worst_x = 0;
  std::vector<float> xs, ys;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint64_t b = 0; b <= kInf; b += kStride) xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(b) | sign));
  }
  ys.resize(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) ys[i] = exp_f32(xs[i]);  // the vectorised loop
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t err = std::abs(ulp_index(ys[i]) - ulp_index(reference_exp(xs[i])));
    if (err > worst) {
      worst = err;
      worst_x = xs[i];
    }
  }
  BOOST_TEST(xs.size() > 30'000'000u);
  BOOST_TEST(worst <= 1, "max error " << worst << " ulp at x = " << worst_x);
}

// Every 16th float in [-1, 1] (down to 2^-40 in magnitude): the range attention scores minus
// their maximum mostly fall in, swept densely.
BOOST_AUTO_TEST_CASE(exp_f32_dense_near_zero_and_exact_at_zero) {
  int64_t worst = 0;
  const uint32_t lo = std::bit_cast<uint32_t>(0x1p-40f), hi = std::bit_cast<uint32_t>(1.0f);
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t b = lo; b <= hi; b += 16) {
      const float x = std::bit_cast<float>(b | sign);
      worst = std::max(worst, std::abs(ulp_index(exp_f32(x)) - ulp_index(reference_exp(x))));
    }
  }
  BOOST_TEST(worst <= 1);
  BOOST_TEST(exp_f32(0.0f) == 1.0f);
  BOOST_TEST(exp_f32(-0.0f) == 1.0f);
  BOOST_TEST(exp_f32(std::numeric_limits<float>::denorm_min()) == 1.0f);
  BOOST_TEST(exp_f32(-std::numeric_limits<float>::denorm_min()) == 1.0f);
}

BOOST_AUTO_TEST_CASE(exp_f32_special_values_overflow_and_underflow) {
  const float inf = std::numeric_limits<float>::infinity();
  BOOST_TEST(exp_f32(inf) == inf);
  const float at_minus_inf = exp_f32(-inf);
  BOOST_TEST(at_minus_inf == 0.0f);
  BOOST_TEST(!std::signbit(at_minus_inf));
  BOOST_TEST(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
  BOOST_TEST(std::isnan(exp_f32(-std::numeric_limits<float>::quiet_NaN())));
  BOOST_TEST(exp_f32(std::numeric_limits<float>::max()) == inf);
  BOOST_TEST(exp_f32(-std::numeric_limits<float>::max()) == 0.0f);
  // Around the overflow threshold ln(FLT_MAX) = 88.7228391...: finite below, +inf above.
  BOOST_TEST(exp_f32(88.72283f) == reference_exp(88.72283f));
  BOOST_TEST(std::isfinite(exp_f32(88.72283f)));
  BOOST_TEST(exp_f32(88.7229f) == inf);
  BOOST_TEST(exp_f32(89.5f) == inf);
  // Subnormal results down to the smallest one, then 0.
  for (float x : {-87.5f, -90.0f, -100.0f, -103.0f, -103.27893f, -103.9f}) {
    BOOST_TEST(std::abs(ulp_index(exp_f32(x)) - ulp_index(reference_exp(x))) <= 1, "x = " << x);
  }
  BOOST_TEST(exp_f32(-103.97208f) == std::numeric_limits<float>::denorm_min());
  BOOST_TEST(exp_f32(-104.0f) == 0.0f);
  BOOST_TEST(exp_f32(-200.0f) == 0.0f);
  // Values a softmax meets: exp(x - max) for the maximum is exactly 1.
  BOOST_TEST(exp_f32(1.0f) == reference_exp(1.0f));
}

BOOST_AUTO_TEST_CASE(vectorised_loop_matches_one_call_at_a_time) {
  Generator gen(7);
  std::vector<float> xs(4099);
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = static_cast<float>(200.0 * Generator::uniform_f64(gen.next_stream(), i) - 110.0);
  }
  xs[5] = -std::numeric_limits<float>::infinity();
  xs[6] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> ys(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) ys[i] = exp_f32(xs[i]);
  for (size_t i = 0; i < xs.size(); ++i) {
    const float one = exp_one(xs[i]);
    BOOST_TEST((std::bit_cast<uint32_t>(ys[i]) == std::bit_cast<uint32_t>(one) || (std::isnan(one) && std::isnan(ys[i]))),
               "x = " << xs[i]);
  }
}

// exp_shifted (the row loop, SSE2 and AVX2 copies, in place and out of place) gives exactly
// exp_f32(x - shift) element by element, at every row length around the vector widths.
BOOST_AUTO_TEST_CASE(exp_shifted_matches_exp_f32_in_both_copies_and_in_place) {
  Generator gen(3);
  const uint64_t key = gen.next_stream();
  for (int64_t n : {0, 1, 3, 4, 7, 8, 9, 16, 17, 31, 64, 100}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(60.0 * Generator::normal(key, i));
    if (n > 2) {
      x[1] = -std::numeric_limits<float>::infinity();
      x[2] = std::numeric_limits<float>::quiet_NaN();
    }
    const float shift = n > 0 ? x[0] : 0.0f;
    std::vector<float> avx(x.size()), base(x.size()), inplace = x;
    exp_shifted(x.data(), avx.data(), n, shift);
    exp_shifted(x.data(), base.data(), n, shift, /*allow_avx2=*/false);
    exp_shifted(inplace.data(), inplace.data(), n, shift);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t want = std::bit_cast<uint32_t>(exp_one(x[i] - shift));
      BOOST_TEST(std::bit_cast<uint32_t>(avx[i]) == want, "n " << n << " i " << i);
      BOOST_TEST(std::bit_cast<uint32_t>(base[i]) == want, "n " << n << " i " << i);
      BOOST_TEST(std::bit_cast<uint32_t>(inplace[i]) == want, "n " << n << " i " << i);
    }
  }
}

// The documented order, written out one element at a time.
float reference_lane_sum(const std::vector<float>& x, const std::vector<float>* y) {
  const size_t n = x.size(), full = n - n % 8;
  float p[8] = {};
  for (size_t j = 0; j < full; ++j) p[j % 8] += y ? x[j] * (*y)[j] : x[j];
  float total = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  for (size_t j = full; j < n; ++j) total += y ? x[j] * (*y)[j] : x[j];
  return total;
}

BOOST_AUTO_TEST_CASE(row_reductions_follow_their_documented_order) {
  Generator gen(13);
  const uint64_t key = gen.next_stream();
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 64, 67}) {
    std::vector<float> x(static_cast<size_t>(n)), y(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(1e3 * Generator::normal(key, i));  // mixed signs: order matters
      y[i] = static_cast<float>(Generator::normal(key, 1000 + i));
    }
    BOOST_TEST(std::bit_cast<uint32_t>(sum_lanes(x.data(), n)) == std::bit_cast<uint32_t>(reference_lane_sum(x, nullptr)),
               "n " << n);
    BOOST_TEST(std::bit_cast<uint32_t>(dot_lanes(x.data(), y.data(), n)) ==
                   std::bit_cast<uint32_t>(reference_lane_sum(x, &y)),
               "n " << n);
    float mx = -std::numeric_limits<float>::infinity();
    for (float v : x) mx = std::max(mx, v);
    BOOST_TEST(max_lanes(x.data(), n) == mx, "n " << n);
    // And close to the sum in double (rounding only).
    double exact = 0, scale = 0;
    for (float v : x) {
      exact += v;
      scale += std::abs(v);
    }
    BOOST_TEST(std::abs(sum_lanes(x.data(), n) - exact) <= 1e-6 * (scale + 1.0));
  }
  // max: NaN entries are skipped wherever they sit, -inf rows stay -inf, n = 0 gives -inf.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> row(19, -inf);
  BOOST_TEST(max_lanes(row.data(), 19) == -inf);
  BOOST_TEST(max_lanes(row.data(), 0) == -inf);
  row[3] = nan;
  row[11] = 2.5f;
  row[18] = nan;
  row[12] = 1.0f;
  BOOST_TEST(max_lanes(row.data(), 19) == 2.5f);
  row[17] = 7.0f;  // in the leftovers
  BOOST_TEST(max_lanes(row.data(), 19) == 7.0f);
  BOOST_TEST(std::isnan(sum_lanes(row.data(), 19)));
}

BOOST_AUTO_TEST_CASE(vec_exp_keeps_libm_for_double) {
  for (double x : {-700.0, -1.5, 0.0, 0.3, 1.0, 700.0}) BOOST_TEST(vec_exp(x) == std::exp(x));
  BOOST_TEST(vec_exp(0.5f) == exp_f32(0.5f));
}

BOOST_AUTO_TEST_SUITE_END()

// ---- erf_f32 ----

[[gnu::noinline]] float erf_one(float x) { return erf_f32(x); }

// The bound core/vec_math.h documents: a sweep of all 2^32 bit patterns measured 8.95e-8 (at
// x = 0.9959) when erf_f32 was written.
constexpr double kErfBound = 1e-7;

// Largest |erf_f32(x) - erf(x)| over xs (none NaN), erf in double; erf_f32 runs in one plain
// loop over xs first, the loop GCC vectorises.
double worst_erf_error(const std::vector<float>& xs, float& worst_x) {
  std::vector<float> ys(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) ys[i] = erf_f32(xs[i]);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double err = std::abs(static_cast<double>(ys[i]) - std::erf(static_cast<double>(xs[i])));
    if (err > worst) {
      worst = err;
      worst_x = xs[i];
    }
  }
  return worst;
}

BOOST_AUTO_TEST_SUITE(float_erf)

// Every 127th bit pattern of each sign (about 34 million inputs, every binade from subnormals
// to infinity).
BOOST_AUTO_TEST_CASE(erf_f32_is_within_its_bound_over_the_float_range) {
  constexpr uint32_t kStride = 127;
  constexpr uint32_t kInf = 0x7f800000u;
  std::vector<float> xs;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint64_t b = 0; b <= kInf; b += kStride) xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(b) | sign));
  }
  float worst_x = 0;
  const double worst = worst_erf_error(xs, worst_x);
  BOOST_TEST(xs.size() > 30'000'000u);
  BOOST_TEST(worst <= kErfBound, "max error " << worst << " at x = " << worst_x);
}

// Every multiple of 2^-18 in [-6, 6] (3.1 million inputs): where GELU's inputs live, both pieces
// of the approximation, the switch between them at |x| = 1 and the saturation from 3.92 on.
// Odd symmetry is exact: erf_f32(-x) has the bits of erf_f32(x) with the sign flipped.
BOOST_AUTO_TEST_CASE(erf_f32_dense_on_minus_6_to_6_and_odd) {
  std::vector<float> xs;
  for (int32_t k = -6 * (1 << 18); k <= 6 * (1 << 18); ++k) xs.push_back(std::ldexp(static_cast<float>(k), -18));
  float worst_x = 0;
  const double worst = worst_erf_error(xs, worst_x);
  BOOST_TEST(worst <= kErfBound, "max error " << worst << " at x = " << worst_x);
  int64_t asymmetric = 0;
  for (float x : xs) {
    asymmetric += std::bit_cast<uint32_t>(erf_f32(-x)) != (std::bit_cast<uint32_t>(erf_f32(x)) ^ 0x80000000u);
  }
  BOOST_TEST(asymmetric == 0);
}

BOOST_AUTO_TEST_CASE(erf_f32_special_values_and_saturation) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  BOOST_TEST(std::bit_cast<uint32_t>(erf_f32(0.0f)) == 0u);  // +0, not only == 0
  BOOST_TEST(std::bit_cast<uint32_t>(erf_f32(-0.0f)) == 0x80000000u);
  BOOST_TEST(erf_f32(inf) == 1.0f);
  BOOST_TEST(erf_f32(-inf) == -1.0f);
  BOOST_TEST(std::isnan(erf_f32(nan)));
  BOOST_TEST(std::isnan(erf_f32(-nan)));
  const float tiny = std::numeric_limits<float>::denorm_min(), smallest = std::numeric_limits<float>::min();
  BOOST_TEST(erf_f32(tiny) == tiny);  // 1.128 denorm_min rounds to denorm_min
  BOOST_TEST(erf_f32(-tiny) == -tiny);
  // Near 0 the error is small relative to erf too, not only below the absolute bound.
  for (float x : {smallest, 1e-30f, 1e-10f, 1e-4f, 0.01f}) {
    const double want = std::erf(static_cast<double>(x));
    BOOST_TEST(std::abs(erf_f32(x) - want) <= 0x1p-22 * want, "x = " << x);
  }
  // From 3.9192059 on erfc < 2^-25 and erf rounds to 1 in float: erf_f32 is exactly 1 there,
  // and below that it never passes 1.
  BOOST_TEST(static_cast<float>(std::erf(static_cast<double>(std::nextafter(3.9192059f, 0.0f)))) < 1.0f);
  for (float x : {3.9192059f, 3.92f, 4.0f, 5.0f, 10.0f, 1e10f, std::numeric_limits<float>::max()}) {
    BOOST_TEST(erf_f32(x) == 1.0f, "x = " << x);
    BOOST_TEST(erf_f32(-x) == -1.0f, "x = " << x);
    BOOST_TEST(static_cast<float>(std::erf(static_cast<double>(x))) == 1.0f, "x = " << x);
  }
  float top = 0;
  for (float x = 3.0f; x < 3.9192059f; x = std::nextafter(x, inf)) top = std::max(top, erf_f32(x));
  BOOST_TEST(top <= 1.0f);
  // Either side of the switch between the two pieces at 1.
  for (float x : {std::nextafter(1.0f, 0.0f), 1.0f, std::nextafter(1.0f, 2.0f)}) {
    BOOST_TEST(std::abs(erf_f32(x) - std::erf(static_cast<double>(x))) <= kErfBound, "x = " << x);
  }
}

BOOST_AUTO_TEST_CASE(erf_vectorised_loop_matches_one_call_at_a_time) {
  Generator gen(17);
  const uint64_t key = gen.next_stream();
  std::vector<float> xs(4099);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(3.0 * Generator::normal(key, i));
  xs[5] = -std::numeric_limits<float>::infinity();
  xs[6] = std::numeric_limits<float>::quiet_NaN();
  xs[7] = -0.0f;
  std::vector<float> ys(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) ys[i] = erf_f32(xs[i]);
  for (size_t i = 0; i < xs.size(); ++i) {
    const float one = erf_one(xs[i]);
    BOOST_TEST((std::bit_cast<uint32_t>(ys[i]) == std::bit_cast<uint32_t>(one) || (std::isnan(one) && std::isnan(ys[i]))),
               "x = " << xs[i]);
  }
}

BOOST_AUTO_TEST_CASE(vec_erf_keeps_libm_for_double) {
  for (double x : {-5.0, -1.0, -0.3, 0.0, 1e-300, 0.7, 1.0, 3.5}) BOOST_TEST(vec_erf(x) == std::erf(x));
  BOOST_TEST(vec_erf(0.5f) == erf_f32(0.5f));
}

BOOST_AUTO_TEST_SUITE_END()

// ---- the kernels that call vec_exp: f32 (exp_f32) against f64 (std::exp) ----

BOOST_AUTO_TEST_SUITE(kernels_on_exp_f32)

// Rows of 37 (not a multiple of the vector width), some entries -inf, row 1 entirely -inf,
// large and tiny magnitudes; softmax along the contiguous axis and along a strided one.
BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_f32_match_f64_with_masked_entries) {
  const double inf = std::numeric_limits<double>::infinity();
  Generator gen(5);
  Tensor x = normal(Shape{4, 37}, 0.0, 30.0, gen, DType::f64);
  std::vector<double> v = x.to_vector();
  for (size_t j = 0; j < 37; ++j) v[37 + j] = -inf;
  v[3] = v[80] = v[111] = -inf;
  x = from_vector(v, Shape{4, 37}, DType::f64);
  const Tensor x32 = x.to(DType::f32);
  for (int64_t axis : {1, 0}) {
    const Tensor y = kernels::softmax(x, axis), y32 = kernels::softmax(x32, axis);
    BOOST_TEST(max_abs_diff(y32, y) <= 1e-6, "axis " << axis);
    const Tensor g = normal(Shape{4, 37}, 0.0, 1.0, gen, DType::f64);
    BOOST_TEST(max_abs_diff(kernels::softmax_backward(y32, g.to(DType::f32), axis),
                            kernels::softmax_backward(y, g, axis)) <= 1e-5);
  }
  // log_softmax along rows that have at least one finite entry.
  const Tensor finite = x.narrow(0, 2, 2);
  const Tensor ls = kernels::log_softmax(finite, 1), ls32 = kernels::log_softmax(finite.to(DType::f32), 1);
  std::vector<double> a = ls.to_vector(), b = ls32.to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i])) {
      BOOST_TEST(b[i] == a[i]);
    } else {
      BOOST_TEST(std::abs(a[i] - b[i]) <= 1e-5 * std::max(1.0, std::abs(a[i])));
    }
  }
  const Tensor g = normal(Shape{2, 37}, 0.0, 1.0, gen, DType::f64);
  BOOST_TEST(max_abs_diff(kernels::log_softmax_backward(ls32, g.to(DType::f32), 1),
                          kernels::log_softmax_backward(ls, g, 1)) <= 1e-5);
}

BOOST_AUTO_TEST_CASE(cross_entropy_f32_matches_f64_beyond_one_exp_chunk) {
  // 300 classes: more than the 256-entry buffer the forward computes its exps in.
  Generator gen(9);
  const Tensor logits = normal(Shape{5, 300}, 0.0, 4.0, gen, DType::f64);
  const Indices targets(Shape{5}, {0, 299, 17, 256, 255});
  for (double smoothing : {0.0, 0.1}) {
    const kernels::CrossEntropyForward f = kernels::cross_entropy_forward(logits, targets, -100, smoothing);
    const Tensor l32 = logits.to(DType::f32);
    const kernels::CrossEntropyForward f32 = kernels::cross_entropy_forward(l32, targets, -100, smoothing);
    BOOST_TEST(max_abs_diff(f32.losses, f.losses) <= 1e-5);
    BOOST_TEST(max_abs_diff(f32.lse, f.lse) <= 1e-5);
    const Tensor rg = full(Shape{5}, 0.5, DType::f64);
    BOOST_TEST(max_abs_diff(kernels::cross_entropy_backward(l32, f32.lse, targets, -100, smoothing, rg.to(DType::f32)),
                            kernels::cross_entropy_backward(logits, f.lse, targets, -100, smoothing, rg)) <= 1e-6);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// ---- GELU, which calls vec_erf and vec_exp: f32 against f64 ----

BOOST_AUTO_TEST_SUITE(kernels_on_erf_f32)

// One elementwise op and its backward in f32 against f64 on the same float inputs (so what
// differs is the arithmetic only): x ~ N(0, x_std) and g ~ N(0, 1) over 6 x 37 (not a multiple of
// the vector width), the forward also on a strided view (its other loop). The largest forward
// error relative to max(1, |x|) over both layouts, and the largest gradient error relative to
// max(1, |g|) * grad_scale(x).
struct F32Errors {
  double forward = 0, backward = 0;
};
F32Errors f32_against_f64(kernels::UnaryOp op, Tensor (*backward)(const Tensor&, const Tensor&), uint64_t seed,
                          double x_std, double (*grad_scale)(double)) {
  Generator gen(seed);
  const Tensor x32 = normal(Shape{6, 37}, 0.0, x_std, gen, DType::f32);
  const Tensor g32 = normal(Shape{6, 37}, 0.0, 1.0, gen, DType::f32);
  const Tensor x = x32.to(DType::f64), g = g32.to(DType::f64);
  const std::vector<double> xs = x.to_vector(), gs = g.to_vector();
  const std::vector<double> want = kernels::unary(op, x).to_vector();
  const std::vector<double> want_grad = backward(x, g).to_vector();
  const std::vector<double> got_grad = backward(x32, g32).to_vector();
  const Tensor strided = x32.transpose(0, 1).contiguous().transpose(0, 1);
  BOOST_TEST(!strided.is_contiguous());
  F32Errors e;
  for (const Tensor& in : {x32, strided}) {
    const std::vector<double> got = kernels::unary(op, in).to_vector();
    for (size_t i = 0; i < want.size(); ++i) {
      BOOST_TEST(std::isfinite(got[i]));
      e.forward = std::max(e.forward, std::abs(got[i] - want[i]) / std::max(1.0, std::abs(xs[i])));
    }
  }
  for (size_t i = 0; i < want_grad.size(); ++i) {
    BOOST_TEST(std::isfinite(got_grad[i]));
    e.backward = std::max(e.backward, std::abs(got_grad[i] - want_grad[i]) /
                                          (std::max(1.0, std::abs(gs[i])) * grad_scale(xs[i])));
  }
  return e;
}

// Inputs wide enough that both of erf_f32's pieces and its saturation are used. gelu is
// x (1 + erf) / 2: erf_f32's 1e-7 and a few float roundings scale with |x| (measured 7e-8 |x|
// when written); the gradient's error scales with the upstream gradient (measured 1.1e-7 |g|).
BOOST_AUTO_TEST_CASE(gelu_and_gelu_backward_f32_match_f64) {
  const F32Errors e = f32_against_f64(kernels::UnaryOp::gelu, kernels::gelu_backward, 19, 3.0, [](double) { return 1.0; });
  BOOST_TEST(e.forward <= 2e-7, "max error " << e.forward);
  BOOST_TEST(e.backward <= 5e-7, "max error " << e.backward);
}

// GPT-2's GELU in float (one exp_f32 per element), over inputs that reach both saturated tails.
// x sigmoid(2u) is accurate relative to |x| (exp_f32's 1 ulp, a few float roundings); the
// gradient relative to |g| and max(1, x^2), for the x s (1 - s) u' term, which carries the
// cube's rounding.
BOOST_AUTO_TEST_CASE(gelu_tanh_and_its_backward_f32_match_f64) {
  const F32Errors e = f32_against_f64(kernels::UnaryOp::gelu_tanh, kernels::gelu_tanh_backward, 23, 4.0,
                                      [](double x) { return std::max(1.0, x * x); });
  BOOST_TEST(e.forward <= 3e-7, "max error " << e.forward);
  BOOST_TEST(e.backward <= 5e-7, "max error " << e.backward);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- small_gemm ----

struct GemmCase {
  int64_t m, n, k;
  bool transposed_a;
};
std::ostream& operator<<(std::ostream& os, const GemmCase& c) {
  return os << c.m << "x" << c.n << "x" << c.k << (c.transposed_a ? " A^T" : "");
}

// Edge sizes around the 4-row blocks and the 8/16-column vector blocks, and empty ones.
const std::vector<GemmCase> kGemmCases = {
    {0, 5, 3, false},  {3, 0, 2, false},  {2, 3, 0, false},   {1, 1, 1, false},   {4, 8, 4, false},
    {4, 16, 16, true}, {5, 17, 3, false}, {7, 9, 13, true},   {16, 16, 16, false}, {17, 33, 9, true},
    {3, 7, 5, true},   {8, 4, 2, false},  {33, 24, 31, false}, {64, 64, 32, true},
};

template <typename T>
void check_small_gemm(const GemmCase& c) {
  // A sum of k products in T, then the alpha multiply: each rounding at most eps relative.
  const double eps = std::numeric_limits<T>::epsilon();
  const double tolerance = static_cast<double>(c.k + 2) * eps;
  const int64_t m = c.m, n = c.n, k = c.k;
  const int64_t ldb = n + 3, ldc = n + 2;  // padded rows: the padding must stay untouched
  Generator gen(11);
  const uint64_t key = gen.next_stream();
  std::vector<T> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(std::max<int64_t>(k * ldb, 1)));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<T>(Generator::normal(key, i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<T>(Generator::normal(key, 100000 + i));
  // A is (m, k); stored transposed it is read with strides (1, m).
  const int64_t a_rs = c.transposed_a ? 1 : k, a_cs = c.transposed_a ? m : 1;
  const T alpha = static_cast<T>(0.375);
  const T kPad = static_cast<T>(-12345);
  std::vector<T> fast(static_cast<size_t>(std::max<int64_t>(m * ldc, 1)), kPad), base = fast;
  small_gemm(m, n, k, alpha, a.data(), a_rs, a_cs, b.data(), ldb, fast.data(), ldc);
  small_gemm(m, n, k, alpha, a.data(), a_rs, a_cs, b.data(), ldb, base.data(), ldc, /*allow_avx2=*/false);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const T got = fast[static_cast<size_t>(i * ldc + j)];
      BOOST_TEST(got == base[static_cast<size_t>(i * ldc + j)], "AVX2 and baseline differ at " << i << "," << j);
      if (j >= n) {
        BOOST_TEST(got == kPad, "padding written at " << i << "," << j);
        continue;
      }
      double exact = 0, scale = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double term = static_cast<double>(a[static_cast<size_t>(i * a_rs + p * a_cs)]) *
                            static_cast<double>(b[static_cast<size_t>(p * ldb + j)]);
        exact += term;
        scale += std::abs(term);
      }
      exact *= static_cast<double>(alpha);
      BOOST_TEST(std::abs(static_cast<double>(got) - exact) <= tolerance * std::abs(static_cast<double>(alpha)) * scale,
                 "at " << i << "," << j << ": " << got << " vs " << exact);
    }
  }
}

BOOST_AUTO_TEST_SUITE(small_gemm_products)

BOOST_DATA_TEST_CASE(matches_a_double_product_f32, bdata::make(kGemmCases), c) { check_small_gemm<float>(c); }

BOOST_DATA_TEST_CASE(matches_a_double_product_f64, bdata::make(kGemmCases), c) { check_small_gemm<double>(c); }

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
