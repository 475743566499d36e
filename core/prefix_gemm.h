// Matrix products over a (Tq, Tk) matrix whose rows are prefixes: row i may be nonzero in its
// first reach[i] columns only, and is exactly zero from there on. Attention's weights under a
// mask are such a matrix (under a causal mask, reach[i] = i + 1), and the four products of its
// forward and backward skip the zeros here, so autograd/ops/attention.cpp reads as the maths.
//
// Rows go in blocks of kPrefixBlock = 32: a block's products stop at its extent, one past the
// last column any of its rows reaches (about half of every product under a causal mask is
// skipped). The products that run down the columns instead (C = A^T X) group columns the same
// way: a block of 32 columns starts at the first row that reaches it.
//
// Each product of a block goes to BLAS (gemm, core/gemm.h) straight from the operands' memory,
// or, when it is small, to direct loops (small_gemm, core/vec_math.h): a BLAS call packs both
// operands and zeroes C every time, which costs more than a 16x16x16 product itself. The direct
// loops need unit-strided rows of the right operand, so that operand is copied (transposed) to
// caller-given scratch, once per call, when it does not already lie that way. The bits of every
// result depend on the blocks, the path and the operands only: never on threads or timing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attograd/core/gemm.h"
#include "attograd/core/vec_math.h"

namespace ag {

// How the products of one block run: `automatic` picks by size (what the library uses); tests
// force each path to hold them equal.
enum class PrefixPath { automatic, blas, direct };

// Multiply-adds of one block product up to which the direct loops beat a BLAS call. Measured
// (CPU time of attention forward + backward, f32, one thread, AVX2 machine): direct is 1.3-3x
// faster for 16x16x16 and 32x32x32 slices and up to 10% faster for 64x64x32; about even for
// 64x64x64 and 128x128x32; BLAS is 20-30% faster for 128x128x64, where its packed FMA kernels
// pay for their per-call cost. Above 2^17 the direct path has no clear gain.
constexpr int64_t kDirectMaxMacs = int64_t{1} << 17;

inline bool use_direct(PrefixPath path, int64_t macs) {
  switch (path) {
    case PrefixPath::automatic: return macs <= kDirectMaxMacs;
    case PrefixPath::blas: return false;
    case PrefixPath::direct: return true;
  }
  return false;
}

// A (rows, cols) matrix as BLAS reads it: row-major with row stride ld (Transpose::no), or the
// transpose of a row-major (cols, rows) matrix with row stride ld (Transpose::yes).
template <typename T>
struct MatrixRef {
  const T* data = nullptr;
  Transpose trans = Transpose::no;
  int64_t ld = 1;

  const T* row(int64_t r) const { return data + (trans == Transpose::no ? r * ld : r); }
  int64_t row_stride() const { return trans == Transpose::no ? ld : 1; }
  int64_t col_stride() const { return trans == Transpose::no ? 1 : ld; }
};

// The (rows, cols) matrix `m` with unit-strided rows, or with `transposed` its (cols, rows)
// transpose: in place when it already lies that way, else copied into `scratch` (rows * cols).
// `ld` receives the row stride.
template <typename T>
const T* unit_rows(const MatrixRef<T>& m, int64_t rows, int64_t cols, bool transposed, T* scratch, int64_t& ld) {
  if (m.trans == (transposed ? Transpose::yes : Transpose::no)) {
    ld = m.ld;
    return m.data;
  }
  // The stored matrix is the other orientation: (cols, rows) for plain rows, (rows, cols) else.
  const int64_t stored_rows = transposed ? rows : cols, stored_cols = transposed ? cols : rows;
  transpose_matrix(m.data, m.ld, stored_rows, stored_cols, scratch);
  ld = stored_rows;
  return scratch;
}

constexpr int64_t kPrefixBlock = 32;

// The blocks of a (Tq, Tk) prefix matrix.
struct PrefixBlocks {
  int64_t Tq, Tk;
  std::vector<int64_t> extent;     // per block of rows: columns [0, extent) may be nonzero
  std::vector<int64_t> first_row;  // per block of columns: the rows before it are zero there

  // reach[i]: one past the last column row i may be nonzero in (0: none), for Tq rows.
  PrefixBlocks(const std::vector<int64_t>& reach, int64_t cols)
      : Tq(static_cast<int64_t>(reach.size())),
        Tk(cols),
        extent(static_cast<size_t>((static_cast<int64_t>(reach.size()) + kPrefixBlock - 1) / kPrefixBlock), 0),
        first_row(static_cast<size_t>((Tk + kPrefixBlock - 1) / kPrefixBlock), Tq) {
    for (size_t i = 0; i < reach.size(); ++i) {
      int64_t& e = extent[i / kPrefixBlock];
      e = std::max(e, reach[i]);
      // Column blocks are visited from the last reached one down, stopping at one already
      // reached by an earlier row (it and the blocks before it have their first row).
      for (int64_t c = (reach[i] + kPrefixBlock - 1) / kPrefixBlock - 1; c >= 0; --c) {
        int64_t& first = first_row[static_cast<size_t>(c)];
        if (first < static_cast<int64_t>(i)) break;
        first = static_cast<int64_t>(i);
      }
    }
  }
  int64_t row_blocks() const { return static_cast<int64_t>(extent.size()); }
  int64_t col_blocks() const { return static_cast<int64_t>(first_row.size()); }

  // Row block r: rows [first, first + count), nonzero in columns [0, reach) only.
  struct Rows {
    int64_t first, count, reach;
  };
  Rows rows(int64_t r) const {
    return {r * kPrefixBlock, std::min(kPrefixBlock, Tq - r * kPrefixBlock), extent[static_cast<size_t>(r)]};
  }
  // Column block c: columns [first, first + count), nonzero in rows [from, Tq) only.
  struct Cols {
    int64_t first, count, from;
  };
  Cols cols(int64_t c) const {
    return {c * kPrefixBlock, std::min(kPrefixBlock, Tk - c * kPrefixBlock), first_row[static_cast<size_t>(c)]};
  }
};

// One past the last nonzero of x[0], x[step], ... x[(n - 1) step]: scanned from the end, eight
// at a time over unit-strided zeros (a causal row is mostly zeros there).
template <typename T>
int64_t last_nonzero_end(const T* x, int64_t n, int64_t step) {
  int64_t j = n;
  if (step == 1) {
    while (j >= 8) {
      bool any = false;
      for (int64_t e = j - 8; e < j; ++e) any |= x[e] != T(0);
      if (any) break;
      j -= 8;
    }
  }
  while (j > 0 && x[(j - 1) * step] == T(0)) --j;
  return j;
}

// The blocks of a given (Tq, Tk) matrix P (row stride Tk): each row reaches one past its last
// nonzero. For a matrix that comes without the structure that made it.
template <typename T>
PrefixBlocks blocks_of_nonzeros(const T* P, int64_t Tq, int64_t Tk) {
  std::vector<int64_t> reach(static_cast<size_t>(Tq));
  for (int64_t i = 0; i < Tq; ++i) reach[static_cast<size_t>(i)] = last_nonzero_end(P + i * Tk, Tk, int64_t{1});
  return PrefixBlocks(reach, Tk);
}

// C (Tq, Tk), row stride Tk, = alpha A X^T, A: (Tq, D), X: (Tk, D), a row block at a time up
// to its extent. Each row then goes to each_row(i, row, n) with its first n entries computed,
// and entries n.. are zeroed. x_columns: scratch for X^T (D * Tk) when the direct loops need
// it (X.trans == Transpose::no).
template <typename T, typename EachRow>
void prefix_gemm_abt(const PrefixBlocks& blocks, PrefixPath path, T alpha, const MatrixRef<T>& A,
                     const MatrixRef<T>& X, int64_t D, T* x_columns, T* C, EachRow&& each_row) {
  const int64_t Tk = blocks.Tk;
  const T* xt = nullptr;
  int64_t ld = 0;
  for (int64_t r = 0; r < blocks.row_blocks(); ++r) {
    const auto [r0, rows, n] = blocks.rows(r);
    if (use_direct(path, rows * n * D)) {
      if (!xt) xt = unit_rows(X, Tk, D, true, x_columns, ld);
      small_gemm(rows, n, D, alpha, A.row(r0), A.row_stride(), A.col_stride(), xt, ld, C + r0 * Tk, Tk);
    } else {
      gemm(A.trans, flipped(X.trans), rows, n, D, alpha, A.row(r0), A.ld, X.data, X.ld, T(0), C + r0 * Tk, Tk);
    }
    for (int64_t i = r0; i < r0 + rows; ++i) {
      each_row(i, C + i * Tk, n);
      std::fill(C + i * Tk + n, C + (i + 1) * Tk, T(0));
    }
  }
}

// C (Tq, D), row stride ldc, = alpha A X, A: the prefix matrix (row stride Tk), X: (Tk, D); row
// block r sums columns [0, extent) only. x_rows: scratch for X (Tk * D) when the direct loops
// need it (X.trans == Transpose::yes).
template <typename T>
void prefix_gemm_ab(const PrefixBlocks& blocks, PrefixPath path, T alpha, const T* A, const MatrixRef<T>& X,
                    int64_t D, T* x_rows, T* C, int64_t ldc) {
  const int64_t Tk = blocks.Tk;
  const T* x = nullptr;
  int64_t ld = 0;
  for (int64_t r = 0; r < blocks.row_blocks(); ++r) {
    const auto [r0, rows, n] = blocks.rows(r);
    if (use_direct(path, rows * D * n)) {
      if (!x) x = unit_rows(X, Tk, D, false, x_rows, ld);
      small_gemm(rows, D, n, alpha, A + r0 * Tk, Tk, 1, x, ld, C + r0 * ldc, ldc);
    } else {
      gemm(Transpose::no, X.trans, rows, D, n, alpha, A + r0 * Tk, Tk, X.data, X.ld, T(0), C + r0 * ldc, ldc);
    }
  }
}

// C (Tk, D), row stride ldc, = alpha A^T X, A: the prefix matrix (row stride Tk), X: (Tq, D);
// column block c sums rows [from, Tq) only. x_rows: scratch for X (Tq * D) when the direct
// loops need it (X.trans == Transpose::yes).
template <typename T>
void prefix_gemm_atb(const PrefixBlocks& blocks, PrefixPath path, T alpha, const T* A, const MatrixRef<T>& X,
                     int64_t D, T* x_rows, T* C, int64_t ldc) {
  const int64_t Tq = blocks.Tq, Tk = blocks.Tk;
  const T* x = nullptr;
  int64_t ld = 0;
  for (int64_t c = 0; c < blocks.col_blocks(); ++c) {
    const auto [c0, cols, from] = blocks.cols(c);
    const T* a = A + from * Tk + c0;  // read transposed
    if (use_direct(path, cols * D * (Tq - from))) {
      if (!x) x = unit_rows(X, Tq, D, false, x_rows, ld);
      small_gemm(cols, D, Tq - from, alpha, a, 1, Tk, x + from * ld, ld, C + c0 * ldc, ldc);
    } else {
      gemm(Transpose::yes, X.trans, cols, D, Tq - from, alpha, a, Tk, X.row(from), X.ld, T(0), C + c0 * ldc, ldc);
    }
  }
}

}  // namespace ag
