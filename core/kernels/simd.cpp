// The loops of core/vec_math.h that are compiled twice, for baseline x86-64 (SSE2) and for
// AVX2 without FMA, the copy chosen at run time. Without FMA and without reassociation both
// copies perform the same IEEE operations per element, so they give the same bits.
//
// small_gemm: C = alpha * A B for the products of one attention head, where a BLAS call's
// fixed cost (packing both operands, zeroing C) exceeds the product.
//
// The block kernel holds a 4- or 6-row by 2-vector block of C in registers over the k loop,
// written with GCC vector types because the auto-vectoriser kept a plain array of accumulators
// on the stack. Lane-wise + and * are the very IEEE operations of scalar code, and nothing is
// fused or reassociated: every element of C is alpha * (sum over p, in order, of A[i][p] B[p][j])
// starting from 0, in the block kernel, the one-row kernel and the leftover-column loop alike.
// The block uses 16-byte vectors in the baseline copy and 32-byte ones in the AVX2 copy.
//
// exp_shifted: y = exp_f32(x - shift) over a row, the softmax inner loop; the auto-vectoriser
// handles it (exp_f32 is written for that), 4 lanes wide in the baseline copy and 8 in AVX2.
#include <cstdint>

#include "attograd/core/vec_math.h"

namespace ag {

namespace {

template <typename T, int kBytes>
struct Lanes;
template <>
struct Lanes<float, 16> {
  typedef float V __attribute__((vector_size(16), aligned(4), may_alias));
};
template <>
struct Lanes<double, 16> {
  typedef double V __attribute__((vector_size(16), aligned(8), may_alias));
};
template <>
struct Lanes<float, 32> {
  typedef float V __attribute__((vector_size(32), aligned(4), may_alias));
};
template <>
struct Lanes<double, 32> {
  typedef double V __attribute__((vector_size(32), aligned(8), may_alias));
};

// C[kRows][kVecs vectors] = alpha * A B for one block; a and b point at its first row/column.
// always_inline: it must be compiled inside the AVX2 function to use 32-byte registers.
template <typename T, int kBytes, int64_t kRows, int64_t kVecs>
[[gnu::always_inline]] inline void gemm_block(int64_t k, T alpha, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
                                              int64_t ldb, T* c, int64_t ldc) {
  using V = typename Lanes<T, kBytes>::V;
  constexpr int64_t kLanes = kBytes / static_cast<int64_t>(sizeof(T));
  V acc[kRows][kVecs] = {};
  for (int64_t p = 0; p < k; ++p) {
    V bp[kVecs];
#pragma GCC unroll 8
    for (int64_t v = 0; v < kVecs; ++v) bp[v] = *reinterpret_cast<const V*>(b + p * ldb + v * kLanes);
#pragma GCC unroll 8
    for (int64_t r = 0; r < kRows; ++r) {
      const T ar = a[r * a_rs + p * a_cs];
#pragma GCC unroll 8
      for (int64_t v = 0; v < kVecs; ++v) acc[r][v] += ar * bp[v];
    }
  }
#pragma GCC unroll 8
  for (int64_t r = 0; r < kRows; ++r) {
#pragma GCC unroll 8
    for (int64_t v = 0; v < kVecs; ++v) *reinterpret_cast<V*>(c + r * ldc + v * kLanes) = alpha * acc[r][v];
  }
}

// Blocks of kRows rows by 2 vectors, then at most one block of 4 rows, leftover rows one at a
// time, leftover columns element by element. kRows is 6 with AVX2 (12 accumulators, 2 B
// vectors, a broadcast and a product fill the 16 registers; measured 10-15% faster than 4 on
// 64x64x32) and 4 in the baseline copy, where 6 would spill.
template <typename T, int kBytes>
[[gnu::always_inline]] inline void small_gemm_impl(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs,
                                                   int64_t a_cs, const T* b, int64_t ldb, T* c, int64_t ldc) {
  constexpr int64_t kRows = kBytes == 32 ? 6 : 4, kVecs = 2;
  constexpr int64_t kCols = kVecs * kBytes / static_cast<int64_t>(sizeof(T));
  const int64_t n_blocked = n - n % kCols;
  int64_t i = 0;
  for (; i + kRows <= m; i += kRows) {
    for (int64_t j = 0; j < n_blocked; j += kCols) {
      gemm_block<T, kBytes, kRows, kVecs>(k, alpha, a + i * a_rs, a_rs, a_cs, b + j, ldb, c + i * ldc + j, ldc);
    }
  }
  if constexpr (kRows > 4) {
    if (i + 4 <= m) {
      for (int64_t j = 0; j < n_blocked; j += kCols) {
        gemm_block<T, kBytes, 4, kVecs>(k, alpha, a + i * a_rs, a_rs, a_cs, b + j, ldb, c + i * ldc + j, ldc);
      }
      i += 4;
    }
  }
  for (; i < m; ++i) {
    for (int64_t j = 0; j < n_blocked; j += kCols) {
      gemm_block<T, kBytes, 1, kVecs>(k, alpha, a + i * a_rs, a_rs, a_cs, b + j, ldb, c + i * ldc + j, ldc);
    }
  }
  for (i = 0; i < m; ++i) {
    for (int64_t j = n_blocked; j < n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += a[i * a_rs + p * a_cs] * b[p * ldb + j];
      c[i * ldc + j] = alpha * acc;
    }
  }
}

template <typename T>
void baseline(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
              int64_t ldb, T* c, int64_t ldc) {
  small_gemm_impl<T, 16>(m, n, k, alpha, a, a_rs, a_cs, b, ldb, c, ldc);
}

// "avx2" without "fma": GCC may not contract a * b + c into one rounding, so the bits match
// the baseline copy.
template <typename T>
[[gnu::target("avx2")]] void avx2(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs, int64_t a_cs,
                                  const T* b, int64_t ldb, T* c, int64_t ldc) {
  small_gemm_impl<T, 32>(m, n, k, alpha, a, a_rs, a_cs, b, ldb, c, ldc);
}

// Separate loops for in place and out of place so that each has no possible overlap to check
// for (GCC would otherwise guard the vector loop with an overlap test that y == x fails).
[[gnu::always_inline]] inline void exp_shifted_impl(const float* x, float* y, int64_t n, float shift) {
  if (x == y) {
    for (int64_t j = 0; j < n; ++j) y[j] = exp_f32(y[j] - shift);
  } else {
    const float* __restrict in = x;
    float* __restrict out = y;
    for (int64_t j = 0; j < n; ++j) out[j] = exp_f32(in[j] - shift);
  }
}

void exp_shifted_baseline(const float* x, float* y, int64_t n, float shift) { exp_shifted_impl(x, y, n, shift); }

[[gnu::target("avx2")]] void exp_shifted_avx2(const float* x, float* y, int64_t n, float shift) {
  exp_shifted_impl(x, y, n, shift);
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

template <typename T>
void dispatch_small_gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
                         int64_t ldb, T* c, int64_t ldc, bool allow_avx2) {
  if (allow_avx2 && cpu_has_avx2()) {
    avx2<T>(m, n, k, alpha, a, a_rs, a_cs, b, ldb, c, ldc);
  } else {
    baseline<T>(m, n, k, alpha, a, a_rs, a_cs, b, ldb, c, ldc);
  }
}

}  // namespace

void small_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                const float* b, int64_t ldb, float* c, int64_t ldc, bool allow_avx2) {
  dispatch_small_gemm<float>(m, n, k, alpha, a, a_rs, a_cs, b, ldb, c, ldc, allow_avx2);
}

void small_gemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t a_rs, int64_t a_cs,
                const double* b, int64_t ldb, double* c, int64_t ldc, bool allow_avx2) {
  dispatch_small_gemm<double>(m, n, k, alpha, a, a_rs, a_cs, b, ldb, c, ldc, allow_avx2);
}

void exp_shifted(const float* x, float* y, int64_t n, float shift, bool allow_avx2) {
  if (allow_avx2 && cpu_has_avx2()) {
    exp_shifted_avx2(x, y, n, shift);
  } else {
    exp_shifted_baseline(x, y, n, shift);
  }
}

}  // namespace ag
