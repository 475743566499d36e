// The one place that calls BLAS: which transpose flag and leading dimension a strided matrix
// takes, and the f32 / f64 product. matmul (core/kernels.h) and attention's per-head products
// (autograd/ops/attention.cpp) both go through here.
#pragma once

#include <cstdint>
#include <string_view>

namespace ag {

enum class Transpose : bool { no, yes };

inline Transpose flipped(Transpose t) { return t == Transpose::no ? Transpose::yes : Transpose::no; }

// How BLAS can read a (rows, cols) matrix whose elements are s_row and s_col apart: row-major
// as it lies (Transpose::no, leading dimension s_row) or as the transpose of a row-major matrix
// (Transpose::yes, leading dimension s_col). False when neither fits (the caller copies).
bool blas_layout(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col, Transpose& trans, int64_t& ld);

// C (m, n), row stride ldc, = alpha op(A) op(B) + beta C, with op(A): (m, k), op(B): (k, n).
// k = 0 is an empty sum (C = beta C), which BLAS's argument checks would refuse. A C of one
// row or one column is a matrix-vector product: a contiguous float32 row times a B lying (n, k)
// (decoding a token through a Linear) is computed here, B's rows split over the pool, each row's
// bits independent of the split; any other goes to BLAS's gemv.
void gemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// The row step at which a product may be cut into separately computed row blocks of C with
// every element keeping the bits of the uncut product: BLAS kernels compute rows in groups of
// their unroll and a block's last rows (past a multiple of it) by another loop, so cuts at
// multiples of every unroll the library may use leave each row on the same path. OpenBLAS's
// Haswell and Zen kernels take our rows 12 at a time in f32 and 4 in f64: 12. Any other
// kernel: 48, a multiple of every unroll seen (4, 8, 12, 16). The second form is the rule for a
// kernel set named as openblas_get_corename() names it.
int64_t gemm_row_alignment();
int64_t gemm_row_alignment(std::string_view openblas_core);

}  // namespace ag
