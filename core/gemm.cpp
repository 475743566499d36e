#include "attograd/core/gemm.h"

#include <cblas.h>

#include <algorithm>

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

void gemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (empty_sum(m, n, k, beta, c, ldc)) return;
  cblas_sgemm(CblasRowMajor, blas(ta), blas(tb), I(m), I(n), I(k), alpha, a, I(lda), b, I(ldb), beta, c, I(ldc));
}

void gemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (empty_sum(m, n, k, beta, c, ldc)) return;
  cblas_dgemm(CblasRowMajor, blas(ta), blas(tb), I(m), I(n), I(k), alpha, a, I(lda), b, I(ldb), beta, c, I(ldc));
}

}  // namespace ag
