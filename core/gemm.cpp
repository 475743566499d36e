#include "attograd/core/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <string_view>

#include "attograd/core/parallel.h"
#include "kernels/lanes.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ATTOGRAD_GEMV_AVX2 1
#endif

namespace ag {

namespace {

CBLAS_TRANSPOSE blas(Transpose t) { return t == Transpose::no ? CblasNoTrans : CblasTrans; }
int I(int64_t v) { return static_cast<int>(v); }

template <typename T>
bool empty_sum(int64_t m, int64_t n, int64_t k, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return true;
  if (k != 0) return false;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  }
  return true;
}

// A product with one row or one column of C is a matrix-vector product, and goes to gemv:
// gemm would pack all of op(B) (or op(A)) for the one row it multiplies, and on OpenBLAS's
// Zen kernels that packing was half the time of decoding a token (batch 1, every linear a
// single row). beta = 0 means C's contents are ignored, so C is zeroed first: BLAS versions
// differ in whether gemv's beta = 0 overwrites y or scales it (0 * NaN garbage stays NaN).
template <typename T, typename Gemv>
bool as_gemv(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
             const T* b, int64_t ldb, T beta, T* c, int64_t ldc, Gemv gemv) {
  if (m == 1) {  // c (1, n) = alpha op(B)^T a + beta c; a's elements are lda apart when transposed
    if (beta == T(0)) std::fill(c, c + n, T(0));
    const int64_t inc_a = ta == Transpose::no ? 1 : lda;
    if (tb == Transpose::no) {  // B lies (k, n)
      gemv(CblasRowMajor, CblasTrans, I(k), I(n), alpha, b, I(ldb), a, I(inc_a), beta, c, 1);
    } else {  // B lies (n, k)
      gemv(CblasRowMajor, CblasNoTrans, I(n), I(k), alpha, b, I(ldb), a, I(inc_a), beta, c, 1);
    }
    return true;
  }
  if (n == 1) {  // c (m, 1), elements ldc apart, = alpha op(A) b + beta c
    if (beta == T(0)) {
      for (int64_t i = 0; i < m; ++i) c[i * ldc] = T(0);
    }
    const int64_t inc_b = tb == Transpose::no ? ldb : 1;
    if (ta == Transpose::no) {  // A lies (m, k)
      gemv(CblasRowMajor, CblasNoTrans, I(m), I(k), alpha, a, I(lda), b, I(inc_b), beta, c, I(ldc));
    } else {  // A lies (k, m)
      gemv(CblasRowMajor, CblasTrans, I(k), I(m), alpha, a, I(lda), b, I(inc_b), beta, c, I(ldc));
    }
    return true;
  }
  return false;
}

// out[j] = x . w_j over k values for the kRows rows w_j = w + j * ldw: two accumulators of 8
// lanes per row over 16 values at a time, added together, summed across lanes, then the last
// k % 16 values one by one. Each row takes the same operations whether it is computed with
// others or alone, so its bits do not depend on how the rows are grouped or split.
template <int kRows>
[[gnu::always_inline]] inline void dot_rows(const float* x, int64_t k, const float* w, int64_t ldw, float* out) {
  int64_t i = 0;
#ifdef ATTOGRAD_GEMV_AVX2
  __m256 lo[kRows], hi[kRows];
  for (int r = 0; r < kRows; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (; i + 16 <= k; i += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      lo[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * ldw + i), x0, lo[r]);
      hi[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * ldw + i + 8), x1, hi[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) out[r] = lanes::horizontal_sum(_mm256_add_ps(lo[r], hi[r]));
#else
  for (int r = 0; r < kRows; ++r) out[r] = 0.0f;
#endif
  for (int r = 0; r < kRows; ++r) {
    float tail = 0.0f;
    for (int64_t j = i; j < k; ++j) tail += x[j] * w[r * ldw + j];
    out[r] += tail;
  }
}

// c (1, n) = alpha a B^T + beta c for a (1, k) contiguous and B (n, k) with row stride ldb: a
// token's product with a Linear's weight when decoding. BLAS's gemv runs on one thread (the
// pool, not BLAS, splits work; core/parallel.cpp) and reads the weight at about half the
// machine's bandwidth; this splits B's rows over the pool and reads them four at a time.
void rows_times_vector(int64_t n, int64_t k, float alpha, const float* a, const float* b, int64_t ldb, float beta,
                       float* c) {
  const double work = 2.0 * static_cast<double>(n) * static_cast<double>(k);
  parallel_for(n, parallel_chunks(n, work), [&](int64_t r0, int64_t r1) {
    const auto store = [&](int64_t r, float dot) { c[r] = beta == 0.0f ? alpha * dot : alpha * dot + beta * c[r]; };
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
      float out[4];
      dot_rows<4>(a, k, b + r * ldb, ldb, out);
      for (int j = 0; j < 4; ++j) store(r + j, out[j]);
    }
    for (; r < r1; ++r) {
      float out;
      dot_rows<1>(a, k, b + r * ldb, ldb, &out);
      store(r, out);
    }
  });
}

}  // namespace

bool blas_layout(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col, Transpose& trans, int64_t& ld) {
  // A single row or column has no second stride to speak of: its leading dimension only has
  // to satisfy BLAS's ld >= width rule.
  if ((cols == 1 || s_col == 1) && (rows == 1 || s_row >= std::max<int64_t>(cols, 1))) {
    trans = Transpose::no;
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : s_row;
    return true;
  }
  if ((rows == 1 || s_row == 1) && (cols == 1 || s_col >= std::max<int64_t>(rows, 1))) {
    trans = Transpose::yes;
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : s_col;
    return true;
  }
  return false;
}

int64_t gemm_row_alignment(std::string_view openblas_core) {
  // Measured with OpenBLAS 0.3.21 by cutting products of many shapes and transposes at each
  // step: Haswell and Zen keep every bit at 12 and 24 but not at 4, 8 or 16 (f32); Prescott
  // and Sandybridge at any step. Unknown kernels keep the conservative 48.
  return openblas_core == "Haswell" || openblas_core == "Zen" ? 12 : 48;
}

int64_t gemm_row_alignment() {
  static const int64_t alignment = [] {
    const char* name = openblas_get_corename();
    return gemm_row_alignment(name != nullptr ? name : "");
  }();
  return alignment;
}

void gemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (empty_sum(m, n, k, beta, c, ldc)) return;
  if (m == 1 && tb == Transpose::yes && (ta == Transpose::no || lda == 1)) {
    rows_times_vector(n, k, alpha, a, b, ldb, beta, c);
    return;
  }
  if (as_gemv(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, cblas_sgemv)) return;
  cblas_sgemm(CblasRowMajor, blas(ta), blas(tb), I(m), I(n), I(k), alpha, a, I(lda), b, I(ldb), beta, c, I(ldc));
}

void gemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (empty_sum(m, n, k, beta, c, ldc)) return;
  if (as_gemv(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, cblas_dgemv)) return;
  cblas_dgemm(CblasRowMajor, blas(ta), blas(tb), I(m), I(n), I(k), alpha, a, I(lda), b, I(ldb), beta, c, I(ldc));
}

}  // namespace ag
