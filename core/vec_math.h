// Float math that GCC can vectorise. std::exp on float is a call into libm per element, so a
// loop over a softmax row runs one scalar exp after another; exp_f32 below is inline,
// branch-free (selects only) and uses nothing but +, *, comparisons, integer shifts and bit
// casts, so `for (j) y[j] = exp_f32(x[j])` becomes SSE2 code at -O3 without fast-math.
//
// Accuracy (tests/core/test_vec_math.cpp sweeps the float range against exp in double):
// within 2 ulp of the correctly rounded result everywhere, including subnormal results;
// exp_f32(0) == 1 exactly, exp_f32(-inf) == 0, exp_f32(+inf) == +inf, overflow gives +inf,
// underflow gives 0, NaN stays NaN. Same input, same bits, on every call and thread.
//
// vec_exp<T> is the one the kernels call: exp_f32 for float, std::exp for double (the f64
// gradient checks keep libm's exp). small_gemm, at the end, is the register-blocked product
// behind attention's small heads.
#pragma once

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

// C (m, n), row stride ldc, = alpha * A (m, k) B (k, n) for small products (core/kernels/
// small_gemm.cpp): A is read through any element strides (a_rs, a_cs), so a transposed view
// costs nothing; B's rows must be unit-strided (row stride ldb). C is overwritten (no beta).
// Every element is alpha * (sum over p in order of A[i][p] B[p][j]): no fused multiply-add, no
// reassociation, so the result is the same bits on every CPU, with or without AVX2 (used when
// the CPU has it and allow_avx2 is true; tests pass false to check the baseline copy).
void small_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                const float* b, int64_t ldb, float* c, int64_t ldc, bool allow_avx2 = true);
void small_gemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t a_rs, int64_t a_cs,
                const double* b, int64_t ldb, double* c, int64_t ldc, bool allow_avx2 = true);

}  // namespace ag
