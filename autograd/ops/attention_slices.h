// The memory plumbing of attention's per-(batch, head) loops (autograd/ops/attention.cpp),
// kept apart so that file reads as the math: how each operand's slices are handed to BLAS or
// to the direct loops, the broadcast mask and bias rows, the dropout of a slice, scratch, and
// the interleaved layout of the results. Internal, not installed.
#pragma once

#include <cstdint>
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
