// Float math that GCC can vectorise. std::exp on float is a call into libm per element, so a
// loop over a softmax row runs one scalar exp after another; exp_f32 below is inline,
// branch-free (selects only) and uses nothing but +, *, comparisons, integer shifts and bit
// casts, so `for (j) y[j] = exp_f32(x[j])` becomes SSE2 code at -O3 without fast-math.
//
// Accuracy (tests/core/test_vec_math.cpp sweeps the float range against exp in double):
// within 1 ulp of the correctly rounded result everywhere, including subnormal results;
// exp_f32(0) == 1 exactly, exp_f32(-inf) == 0, exp_f32(+inf) == +inf, overflow gives +inf,
// underflow gives 0, NaN stays NaN. Same input, same bits, on every call and thread.
//
// erf_f32 (for GELU) is built the same way. Its absolute error against erf in double is at most
// 8.95e-8 (1.5 ulp of erf near 0.84) over all 2^32 floats, measured when it was written; small
// inputs are accurate relative to erf too. erf_f32(+-0) == +-0, erf_f32(-x) == -erf_f32(x) bit
// for bit, +-1 exactly from |x| = 3.9192059 on (where erf rounds to 1) and at +-inf, NaN stays NaN.
//
// vec_exp<T> and vec_erf<T> are the ones the kernels call: exp_f32 / erf_f32 for float, std::exp
// / std::erf for double (float64 runs keep libm). exp_shifted and small_gemm, at the end, are
// compiled for SSE2 and for AVX2: a softmax row's exps and the products of attention heads.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace ag {

inline float exp_f32(float x) {
  // n = round(x / ln 2): adding 1.5 * 2^23 leaves the rounded integer in the low mantissa
  // bits (round to nearest even), read back as an integer without a float-to-int conversion.
  constexpr float kShifter = 12582912.0f;
  const float t = x * 1.44269504088896341f + kShifter;
  // (The subtraction is unsigned: for inputs that are later masked out it may wrap.)
  const int32_t n = static_cast<int32_t>(std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kShifter));
  const float nf = t - kShifter;
  // r = x - n ln 2 in two steps (Cody-Waite): ln2_hi has few significant bits, so n * ln2_hi is
  // exact and the first subtraction loses nothing; |r| <= ln(2) / 2 (plus a hair).
  float r = x - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  // exp(r) = 1 + r + r^2 q(r), q a degree-5 minimax fit of (exp(r) - 1 - r) / r^2 on that interval.
  float q = 1.9875691500e-4f;
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  const float p = q * (r * r) + r + 1.0f;
  // p * 2^n as p * 2^n1 * 2^n2 with n1 + n2 = n: both factors are normal floats for n in
  // [-150, 129] (x in [-104, 89]), the first product is exact, and the second rounds once, which gives correctly
  // scaled subnormal results and lets n = 128 round to FLT_MAX or overflow to +inf as it should.
  // (Signed shifts are defined modulo 2^32 in C++20; for NaN input n is meaningless but p is NaN.)
  const int32_t n1 = n >> 1;
  const int32_t n2 = n - n1;
  const float s1 = std::bit_cast<float>((n1 + 127) << 23);
  const float s2 = std::bit_cast<float>((n2 + 127) << 23);
  // Outside [-104, 89] the float result is 0 or +inf whatever the exact value (and n above
  // leaves the range the scaling handles), so those lanes are overwritten with bit masks; the
  // comparisons are false for NaN, which is already NaN in p. Masks rather than `?:` because
  // GCC would sink the computation into the one arm that uses it and then, as float ops may
  // trap, neither if-convert nor vectorise the loop (clamping x first fails the same way).
  const uint32_t big = 0u - static_cast<uint32_t>(x > 89.0f);      // all ones where exp is +inf
  const uint32_t tiny = 0u - static_cast<uint32_t>(x < -104.0f);   // all ones where exp is 0
  const uint32_t inf_bits = 0x7f800000u;
  const uint32_t bits = std::bit_cast<uint32_t>(p * s1 * s2);
  const float y = std::bit_cast<float>(((bits & ~big) | (inf_bits & big)) & ~tiny);
  return y;
}

template <typename T>
inline T vec_exp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_f32(x);
  } else {
    return std::exp(x);
  }
}

// erf in the same style, for GELU (x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2). It works on
// t = |x| and puts x's sign bit back at the end, so erf_f32(-x) == -erf_f32(x) bit for bit.
// Both pieces below are computed for every input and one is kept by a bit mask (see exp_f32
// for why masks and not `?:`). Coefficients: weighted minimax fits (Remez, done for this file),
// rounded to float.
inline float erf_f32(float x) {
  const uint32_t sign = std::bit_cast<uint32_t>(x) & 0x80000000u;
  const float t = std::bit_cast<float>(std::bit_cast<uint32_t>(x) ^ sign);
  // t < 1: erf(t) = t + t r(t^2), r of degree 6 fitted to erf(t) / t - 1 (error 1.2e-9).
  // Not t p(t^2) with p = 1 + r: p(0) = 2 / sqrt(pi) = 1.1283791671 rounds to float with an
  // error of 6e-8, r(0) = 0.1283791671 with one of 7e-9, and t r is small enough that its own
  // rounding hardly shows in the sum. erf_f32(0) is 0; tiny inputs come out as t + 0.128 t.
  const float s = t * t;
  float r = 7.889122935e-05f;
  r = r * s + -8.020842215e-04f;
  r = r * s + 5.189535674e-03f;
  r = r * s + -2.685444430e-02f;
  r = r * s + 1.128360033e-01f;
  r = r * s + -3.761262596e-01f;
  r = r * s + 1.283791661e-01f;
  const float near = t + t * r;
  // 1 <= t: erf(t) = 1 - erfc(t) and erfc(t) = exp(q(t)), q of degree 6 fitted to log erfc(t)
  // on [1, 4] with the error weighted by erfc(t) (an error in q costs erfc(t) times as much in
  // erf): 1.0e-9 in erf. erfc <= 0.16 here, so exp_f32's 1 ulp adds at most 2e-8.
  float q = 1.855739101e-04f;
  q = q * t + -2.939606551e-03f;
  q = q * t + 2.180531435e-02f;
  q = q * t + -1.030373648e-01f;
  q = q * t + -6.382256746e-01f;
  q = q * t + -1.127040029e+00f;
  q = q * t + -3.537203011e-04f;
  const float far = 1.0f - exp_f32(q);
  // From t = 3.9192059 (the first float where erfc(t) < 2^-25) erf rounds to 1 in float: those
  // lanes, +inf among them, are set to 1 exactly rather than trust q beyond its interval. NaN
  // fails both comparisons and stays in `near`, which is NaN.
  const uint32_t tail = 0u - static_cast<uint32_t>(t >= 1.0f);
  const uint32_t one = 0u - static_cast<uint32_t>(t >= 3.9192059f);
  const uint32_t bits = (std::bit_cast<uint32_t>(near) & ~tail) | (std::bit_cast<uint32_t>(far) & tail);
  const uint32_t one_bits = 0x3f800000u;
  return std::bit_cast<float>(((bits & ~one) | (one_bits & one)) | sign);
}

template <typename T>
inline T vec_erf(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return erf_f32(x);
  } else {
    return std::erf(x);
  }
}

// ---- row reductions in a fixed, vectorised order ----
// Sum of x[0, n) (times y[0, n) for the dot product) and maximum over a row of floats. Eight
// running partials (lane l takes elements l, l + 8, l + 16, ...) in two SSE vectors, combined as
// ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)), then the n % 8 leftovers in order. The
// order depends on n only, so the bits are the same on every run, thread count and CPU; it is
// not left to right, so a sum may differ from a plain loop's in the last bits. A plain loop is
// one dependent add per element (3-4 cycles each); here eight chains run side by side.
typedef float F32x4 __attribute__((vector_size(16), aligned(4), may_alias));

inline float dot_lanes(const float* x, const float* y, int64_t n) {
  F32x4 lo = {}, hi = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    F32x4 a = *reinterpret_cast<const F32x4*>(x + j), b = *reinterpret_cast<const F32x4*>(x + j + 4);
    if (y) {
      a *= *reinterpret_cast<const F32x4*>(y + j);
      b *= *reinterpret_cast<const F32x4*>(y + j + 4);
    }
    lo += a;
    hi += b;
  }
  float total = ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
  for (; j < n; ++j) total += y ? x[j] * y[j] : x[j];
  return total;
}

inline float sum_lanes(const float* x, int64_t n) { return dot_lanes(x, nullptr, n); }

// NaN entries are ignored, as by a running std::max from -inf (-inf for n = 0). The order
// cannot change the value, except that it may pick -0 over +0, which leaves x - max unchanged.
inline float max_lanes(const float* x, int64_t n) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  F32x4 lo = F32x4{} + neg_inf, hi = lo;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const F32x4 a = *reinterpret_cast<const F32x4*>(x + j), b = *reinterpret_cast<const F32x4*>(x + j + 4);
    lo = lo < a ? a : lo;
    hi = hi < b ? b : hi;
  }
  float mx = neg_inf;
  for (int l = 0; l < 4; ++l) mx = std::max(mx, std::max(lo[l], hi[l]));
  for (; j < n; ++j) mx = std::max(mx, x[j]);
  return mx;
}

// ---- compiled for SSE2 and AVX2 (core/kernels/simd.cpp) ----
// Both copies give the same bits (no FMA, no reassociation); the AVX2 one runs when the CPU
// has it and allow_avx2 is true (tests pass false to check the baseline copy).

// y[j] = exp_f32(x[j] - shift) for j < n; y may be x (in place) or a disjoint row.
void exp_shifted(const float* x, float* y, int64_t n, float shift, bool allow_avx2 = true);

// The same for either dtype: exp_shifted for float, std::exp for double.
template <typename T>
inline void exp_row(const T* x, T* y, int64_t n, T shift) {
  if constexpr (std::is_same_v<T, float>) {
    exp_shifted(x, y, n, shift);
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = std::exp(x[j] - shift);
  }
}

// Row reductions for either dtype: the lane versions for float, left-to-right loops for double
// (float64 runs keep the plain order).
template <typename T>
inline T row_sum(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return sum_lanes(x, n);
  } else {
    T total = 0;
    for (int64_t j = 0; j < n; ++j) total += x[j];
    return total;
  }
}
template <typename T>
inline T row_dot(const T* x, const T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return dot_lanes(x, y, n);
  } else {
    T total = 0;
    for (int64_t j = 0; j < n; ++j) total += x[j] * y[j];
    return total;
  }
}
template <typename T>
inline T row_max(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return max_lanes(x, n);
  } else {
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j]);
    return mx;
  }
}

// ---- softmax of one row ----
// y = softmax(x) over n entries (y may be x): the max, the shifted exps and the sum are
// separate passes, vectorised for f32 (the sum in the fixed 8-lane order above). A row that is
// -inf everywhere (every key masked) gives all zeros, not NaN. The softmax op and attention's
// weights both use this, so their rows round alike.
//
// The second form also reports the row's statistics: its maximum and the sum of exp(x - max)
// (-inf and 0 for a row that is -inf everywhere). softmax_row_from(x, y, n, max, sum) then gives
// the same y again, bit for bit, without the two reductions: attention keeps these two numbers
// per row instead of the weights, and its backward rebuilds the weights from the scores.
template <typename T>
inline void softmax_row(const T* x, T* y, int64_t n, T& max, T& sum) {
  max = row_max(x, n);
  if (max == -std::numeric_limits<T>::infinity()) {
    std::fill(y, y + n, T(0));
    sum = 0;
    return;
  }
  exp_row(x, y, n, max);
  sum = row_sum(y, n);
  const T inv = 1 / sum;
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

template <typename T>
inline void softmax_row(const T* x, T* y, int64_t n) {
  T max, sum;
  softmax_row(x, y, n, max, sum);
}

template <typename T>
inline void softmax_row_from(const T* x, T* y, int64_t n, T max, T sum) {
  if (max == -std::numeric_limits<T>::infinity()) {
    std::fill(y, y + n, T(0));
    return;
  }
  exp_row(x, y, n, max);
  const T inv = 1 / sum;
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

// ---- transposing a matrix ----
// The 4x4 block at src (row stride ld) transposed into dst (row stride ldd), through SSE
// shuffles: pure data movement, 16 loads and stores instead of 16 strided scalar copies.
inline void transpose4x4(const float* src, int64_t ld, float* dst, int64_t ldd) {
  const F32x4 r0 = *reinterpret_cast<const F32x4*>(src), r1 = *reinterpret_cast<const F32x4*>(src + ld);
  const F32x4 r2 = *reinterpret_cast<const F32x4*>(src + 2 * ld), r3 = *reinterpret_cast<const F32x4*>(src + 3 * ld);
  const F32x4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5), t1 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
  const F32x4 t2 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7), t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
  *reinterpret_cast<F32x4*>(dst) = __builtin_shufflevector(t0, t1, 0, 1, 4, 5);
  *reinterpret_cast<F32x4*>(dst + ldd) = __builtin_shufflevector(t0, t1, 2, 3, 6, 7);
  *reinterpret_cast<F32x4*>(dst + 2 * ldd) = __builtin_shufflevector(t2, t3, 0, 1, 4, 5);
  *reinterpret_cast<F32x4*>(dst + 3 * ldd) = __builtin_shufflevector(t2, t3, 2, 3, 6, 7);
}

// dst (n, m), row stride m, = the transpose of src (m, n), row stride ld.
template <typename T>
void transpose_matrix(const T* src, int64_t ld, int64_t m, int64_t n, T* dst) {
  int64_t r0 = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; r0 + 4 <= m; r0 += 4) {
      int64_t c = 0;
      for (; c + 4 <= n; c += 4) transpose4x4(src + r0 * ld + c, ld, dst + c * m + r0, m);
      for (; c < n; ++c) {
        for (int64_t r = r0; r < r0 + 4; ++r) dst[c * m + r] = src[r * ld + c];
      }
    }
  }
  for (; r0 < m; ++r0) {
    for (int64_t c = 0; c < n; ++c) dst[c * m + r0] = src[r0 * ld + c];
  }
}

// C (m, n), row stride ldc, = alpha * A (m, k) B (k, n) for small products: A is read through
// any element strides (a_rs, a_cs), so a transposed view costs nothing; B's rows must be
// unit-strided (row stride ldb). C is overwritten (no beta).
// Every element is alpha * (sum over p in order of A[i][p] B[p][j]): no fused multiply-add, no
// reassociation, so the result is the same bits on every CPU, with or without AVX2.
void small_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                const float* b, int64_t ldb, float* c, int64_t ldc, bool allow_avx2 = true);
void small_gemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t a_rs, int64_t a_cs,
                const double* b, int64_t ldb, double* c, int64_t ldc, bool allow_avx2 = true);

}  // namespace ag
