// The memory plumbing of attention's per-(batch, head) loops (autograd/ops/attention.cpp),
// kept apart so that file reads as the math: how each operand's slices are handed to BLAS or
// to the direct loops, the broadcast mask and bias rows, the dropout of a slice, scratch, and
// the interleaved layout of the results. Internal, not installed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/gemm.h"
#include "attograd/core/vec_math.h"

namespace ag::kernels::attention_slices {

// How BLAS reads the (rows, cols) matrices of one operand's (b, h) slices.
struct Operand {
  Tensor t;  // the caller's tensor, or a contiguous copy when its matrices are not BLAS-readable
  Transpose trans = Transpose::no;
  int64_t ld = 1;
  int64_t stride_b = 0, stride_h = 0;

  template <typename T>
  const T* slice(int64_t b, int64_t h) const {
    return t.data<T>() + b * stride_b + h * stride_h;
  }
};

inline Operand make_operand(const Tensor& x) {
  Operand o;
  o.t = x;
  const auto fits = [&o] {
    const Tensor& t = o.t;
    return blas_layout(t.shape()[2], t.shape()[3], t.strides()[2], t.strides()[3], o.trans, o.ld);
  };
  if (!fits()) {
    o.t = x.clone();
    fits();
  }
  o.stride_b = o.t.strides()[0];
  o.stride_h = o.t.strides()[1];
  return o;
}

// Row r of an operand's (b, h) slice matrix, as BLAS and the direct loops read it.
template <typename T>
const T* row_at(const Operand& o, int64_t b, int64_t h, int64_t r) {
  return o.slice<T>(b, h) + (o.trans == Transpose::no ? r * o.ld : r);
}

// An optional (B, H, Tq, Tk)-broadcast tensor read through its strides (0 where broadcast).
template <typename T>
struct ScoreOperand {
  const T* data = nullptr;
  std::vector<int64_t> strides;

  ScoreOperand(const Tensor& t, const Shape& scores) {
    if (!t.defined()) return;
    data = t.data<T>();
    strides = t.expand(scores).strides();
  }
  const T* row(int64_t b, int64_t h, int64_t i) const {
    return data + b * strides[0] + h * strides[1] + i * strides[2];
  }
  int64_t step() const { return strides[3]; }
};

// ---- the keys a mask hides ----
// Query rows go in blocks of kBlock, and a block's products stop at its extent: one past the
// last key any of its rows may weight. Every weight past it is exactly zero, so those columns
// of the scores are neither computed nor multiplied (under a causal mask, about half of each
// product). The products that run along the queries instead (dV = P^T dO, dK = dS^T Q) group
// keys the same way: a key block starts at the first query row that reaches it.
constexpr int64_t kBlock = 32;

struct Blocks {
  int64_t Tq, Tk;
  std::vector<int64_t> extent;     // per block of query rows: keys [0, extent) may be weighted
  std::vector<int64_t> first_row;  // per block of keys: the rows before it weight none of them

  // reach[i]: one past the last key query row i may weight (0: none), for Tq rows and Tk keys.
  Blocks(const std::vector<int64_t>& reach, int64_t keys)
      : Tq(static_cast<int64_t>(reach.size())),
        Tk(keys),
        extent(static_cast<size_t>((static_cast<int64_t>(reach.size()) + kBlock - 1) / kBlock), 0),
        first_row(static_cast<size_t>((Tk + kBlock - 1) / kBlock), Tq) {
    for (size_t i = 0; i < reach.size(); ++i) {
      int64_t& e = extent[i / kBlock];
      e = std::max(e, reach[i]);
      // Key blocks are visited from the last reached one down, stopping at one already reached
      // by an earlier row (it and the blocks before it have their first row).
      for (int64_t c = (reach[i] + kBlock - 1) / kBlock - 1; c >= 0; --c) {
        int64_t& first = first_row[static_cast<size_t>(c)];
        if (first < static_cast<int64_t>(i)) break;
        first = static_cast<int64_t>(i);
      }
    }
  }
  int64_t query_blocks() const { return static_cast<int64_t>(extent.size()); }
  int64_t key_blocks() const { return static_cast<int64_t>(first_row.size()); }

  // Query block r: rows [first, first + count), weighting keys [0, reach).
  struct Query {
    int64_t first, count, reach;
  };
  Query query(int64_t r) const {
    return {r * kBlock, std::min(kBlock, Tq - r * kBlock), extent[static_cast<size_t>(r)]};
  }
  // Key block c: keys [first, first + count), weighted by rows [from, Tq) only.
  struct Key {
    int64_t first, count, from;
  };
  Key key(int64_t c) const {
    return {c * kBlock, std::min(kBlock, Tk - c * kBlock), first_row[static_cast<size_t>(c)]};
  }
};

// One past the last nonzero of x[0], x[step], ... x[(n - 1) step]: scanned from the end, eight
// at a time over unit-strided zeros (a causal row is mostly zeros there).
template <typename T>
int64_t reach_of_row(const T* x, int64_t n, int64_t step) {
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

// The blocks of a slice's weights P (Tq, Tk): each row reaches one past its last nonzero.
template <typename T>
Blocks weight_blocks(const T* P, int64_t Tq, int64_t Tk) {
  std::vector<int64_t> reach(static_cast<size_t>(Tq));
  for (int64_t i = 0; i < Tq; ++i) reach[static_cast<size_t>(i)] = reach_of_row(P + i * Tk, Tk, int64_t{1});
  return Blocks(reach, Tk);
}

// The blocks of each slice from the keep mask: a row reaches one past its last kept key (every
// key without a mask). Worked out once when every (b, h) shares the mask (none, or a causal
// (Tq, Tk) one), else for each slice.
template <typename T>
class MaskBlocks {
 public:
  MaskBlocks(const ScoreOperand<T>& mask, int64_t Tq, int64_t Tk) : mask_(mask), Tq_(Tq), Tk_(Tk) {
    if (!mask.data || (mask.strides[0] == 0 && mask.strides[1] == 0)) shared_.emplace_back(reach(0, 0), Tk);
  }
  // The blocks of slice (b, h): the shared ones, or worked out into `own`.
  const Blocks& of(int64_t b, int64_t h, std::optional<Blocks>& own) const {
    if (!shared_.empty()) return shared_.front();
    return own.emplace(reach(b, h), Tk_);
  }

 private:
  std::vector<int64_t> reach(int64_t b, int64_t h) const {
    std::vector<int64_t> r(static_cast<size_t>(Tq_), Tk_);
    if (!mask_.data) return r;
    for (int64_t i = 0; i < Tq_; ++i) r[static_cast<size_t>(i)] = reach_of_row(mask_.row(b, h, i), Tk_, mask_.step());
    return r;
  }
  const ScoreOperand<T>& mask_;
  int64_t Tq_, Tk_;
  std::vector<Blocks> shared_;  // empty or one
};

// dst[e] = src[e] * scale where the mask keeps element base + e, else 0 (dst may be src).
template <typename T>
void drop(const T* src, T* dst, int64_t n, uint64_t base, const DropoutMask& dropout) {
  const T scale = static_cast<T>(dropout.scale());
  for (int64_t e = 0; e < n; ++e) dst[e] = dropout.keeps(base + static_cast<uint64_t>(e)) ? src[e] * scale : T(0);
}

// Element strides of an operand's (rows, cols) slice matrix.
inline int64_t row_stride(const Operand& o) { return o.trans == Transpose::no ? o.ld : 1; }
inline int64_t col_stride(const Operand& o) { return o.trans == Transpose::no ? 1 : o.ld; }

// The (rows, cols) slice of `o` as a matrix with unit-strided rows, or with `transposed` its
// (cols, rows) transpose: in place when it already lies that way in memory, else a copy in
// `scratch` (rows * cols). `ld` receives the row stride.
template <typename T>
const T* unit_rows(const Operand& o, int64_t b, int64_t h, int64_t rows, int64_t cols, bool transposed, T* scratch,
                   int64_t& ld) {
  const T* p = o.slice<T>(b, h);
  if (o.trans == (transposed ? Transpose::yes : Transpose::no)) {
    ld = o.ld;
    return p;
  }
  // The stored matrix is the other orientation: (cols, rows) for plain rows, (rows, cols) else.
  const int64_t stored_rows = transposed ? rows : cols, stored_cols = transposed ? cols : rows;
  transpose_matrix(p, o.ld, stored_rows, stored_cols, scratch);
  ld = stored_rows;
  return scratch;
}

template <typename T>
const T* rows_of(const Operand& o, int64_t b, int64_t h, int64_t rows, int64_t cols, T* scratch, int64_t& ld) {
  return unit_rows(o, b, h, rows, cols, false, scratch, ld);
}

template <typename T>
const T* columns_of(const Operand& o, int64_t b, int64_t h, int64_t rows, int64_t cols, T* scratch, int64_t& ld) {
  return unit_rows(o, b, h, rows, cols, true, scratch, ld);
}

// Scratch sized for one slice, allocated once per parallel chunk; empty when unused.
template <typename T>
std::vector<T> scratch_if(bool needed, int64_t elems) {
  return std::vector<T>(needed ? static_cast<size_t>(elems) : 0);
}

// A (B, H, T, D) result laid out in memory as (B, T, H, D), returned as the permuted view.
// Multi-head attention moves the heads back beside each other ((B, T, H * D) for the output
// projection, and q, k and v come from (B, T, H * D) projections), so with this layout the
// head merge of the output and of the q/k/v gradients is a view instead of a copy. Slice
// (b, h) starts at b * T * H * D + h * D with rows H * D apart.
inline Tensor heads_interleaved(int64_t B, int64_t H, int64_t T, int64_t D, DType dtype) {
  return Tensor(Shape{B, T, H, D}, dtype).permute({0, 2, 1, 3});
}

template <typename T>
T* interleaved_slice(Tensor& t, int64_t b, int64_t h) {
  const int64_t H = t.shape()[1], len = t.shape()[2], D = t.shape()[3];
  return t.data<T>() + b * len * H * D + h * D;
}

}  // namespace ag::kernels::attention_slices
