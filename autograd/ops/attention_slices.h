// How attention (autograd/ops/attention.cpp) takes its (B, H, ...) tensors apart into the
// (batch, head) slices that core/prefix_gemm.h multiplies, kept apart so that file reads as
// the maths: q/k/v as BLAS-readable matrices, the bias rows, the mask's reach and pattern rows,
// the dropout of a slice, scratch, and the interleaved layout of the results. Internal, not
// installed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "attograd/autograd/attention_mask.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/prefix_gemm.h"

namespace ag::kernels::attention_slices {

// A (B, H, rows, cols) operand whose (b, h) matrices BLAS reads in place: q, k and v produced
// by permuting a (B, T, H, D) tensor are used as they lie; one BLAS cannot read is copied once.
struct Operand {
  Tensor t;
  Transpose trans = Transpose::no;
  int64_t ld = 1;
  int64_t stride_b = 0, stride_h = 0;

  Operand() = default;
  explicit Operand(const Tensor& x) : t(x) {
    const auto fits = [this] {
      return blas_layout(t.shape()[2], t.shape()[3], t.strides()[2], t.strides()[3], trans, ld);
    };
    if (!fits()) {
      t = x.clone();
      fits();
    }
    stride_b = t.strides()[0];
    stride_h = t.strides()[1];
  }
  template <typename T>
  MatrixRef<T> at(int64_t b, int64_t h) const {
    return {t.data<T>() + b * stride_b + h * stride_h, trans, ld};
  }
};

// The additive bias: undefined, or a tensor broadcast to (B, H, Tq, Tk), read through its
// strides (0 where broadcast).
template <typename T>
struct BiasRows {
  const T* data = nullptr;
  std::vector<int64_t> strides;

  BiasRows(const Tensor& bias, const Shape& scores) {
    if (!bias.defined()) return;
    data = bias.data<T>();
    strides = bias.expand(scores).strides();
  }
  // s[j] += bias[b, h, i, j] for j < n.
  void add(int64_t b, int64_t h, int64_t i, T* s, int64_t n) const {
    if (!data) return;
    const T* a = data + b * strides[0] + h * strides[1] + i * strides[2];
    for (int64_t j = 0; j < n; ++j) s[j] += a[j * strides[3]];
  }
};

// The mask as the kernel reads it, slice by slice: each row's reach (the keys from it on are
// hidden) comes from the mask's structure, and only a keep pattern is read key by key. The
// blocks are worked out once when every slice has the same rows (no mask, causal, a shared
// pattern), else once per slice into the caller's SliceRows.
struct SliceRows {
  std::vector<int64_t> reach;
  std::optional<PrefixBlocks> blocks;
};

class MaskRows {
 public:
  MaskRows(const AttentionMask& mask, int64_t Tq, int64_t Tk) : mask_(mask), Tq_(Tq), Tk_(Tk) {
    if (mask.same_for_every_slice()) {
      mask.reach_of(0, 0, Tq, Tk, shared_.reach);
      shared_.blocks.emplace(shared_.reach, Tk);
    }
    const Tensor& p = mask.keep_pattern();
    if (p.defined()) {
      pattern_ = p.data<float>();
      const Shape& s = p.shape();
      strides_ = {s[0] == 1 ? 0 : s[1] * s[2] * s[3], s[1] == 1 ? 0 : s[2] * s[3], s[2] == 1 ? 0 : s[3],
                  s[3] == 1 ? 0 : int64_t{1}};
    }
  }
  // The rows of slice (b, h): the shared ones, or worked out into `own`.
  const SliceRows& of(int64_t b, int64_t h, SliceRows& own) const {
    if (shared_.blocks) return shared_;
    mask_.reach_of(b, h, Tq_, Tk_, own.reach);
    own.blocks.emplace(own.reach, Tk_);
    return own;
  }
  // Row i of slice (b, h), its first n scores computed: every key the mask hides goes to -inf.
  template <typename T>
  void hide(int64_t b, int64_t h, int64_t i, const SliceRows& rows, T* s, int64_t n) const {
    const int64_t reach = rows.reach[static_cast<size_t>(i)];
    if (pattern_) {
      const float* m = pattern_ + b * strides_[0] + h * strides_[1] + i * strides_[2];
      for (int64_t j = 0; j < reach; ++j) {
        if (m[j * strides_[3]] == 0.0f) s[j] = -std::numeric_limits<T>::infinity();
      }
    }
    std::fill(s + std::min(reach, n), s + n, -std::numeric_limits<T>::infinity());
  }

 private:
  const AttentionMask& mask_;
  int64_t Tq_, Tk_;
  SliceRows shared_;
  const float* pattern_ = nullptr;
  std::vector<int64_t> strides_;
};

// dst[e] = src[e] * scale where the mask keeps element base + e, else 0 (dst may be src).
template <typename T>
void drop(const T* src, T* dst, int64_t n, uint64_t base, const DropoutMask& dropout) {
  const T scale = static_cast<T>(dropout.scale());
  for (int64_t e = 0; e < n; ++e) dst[e] = dropout.keeps(base + static_cast<uint64_t>(e)) ? src[e] * scale : T(0);
}

// Scratch sized for one slice, allocated once per parallel chunk; empty when unused.
template <typename T>
std::vector<T> scratch_if(bool needed, int64_t elems) {
  return std::vector<T>(needed ? static_cast<size_t>(elems) : 0);
}

// dst (rows, cols), row stride ld, += src (rows, cols) contiguous: a grouped-query head's
// gradient gathering its query heads' parts.
template <typename T>
void add_matrix(T* dst, int64_t ld, const T* src, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * ld + c] += src[r * cols + c];
  }
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
