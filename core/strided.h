// Walking strided tensors. Kernels call for_each_row to visit every element of a shape in
// row-major order, with one running offset per operand (each operand has its own strides, so
// transposed, sliced and broadcast (stride 0) views are read in place, without a copy).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "attograd/core/shape.h"

namespace ag {

// Calls fn(offsets, n, inner_strides) once per innermost row: `offsets[k]` is operand k's
// element offset of the row's first element, and the row's elements follow at
// `inner_strides[k]` apart. Dimensions of size 1 are skipped and rows are merged where every
// operand is contiguous across them, so contiguous data arrives as one long row.
template <size_t N, typename Fn>
void for_each_row(const Shape& shape, const std::array<const std::vector<int64_t>*, N>& strides, Fn&& fn) {
  // Collapse: drop size-1 dims, merge dim i into i+1 when stride[i] == stride[i+1] * size[i+1]
  // for every operand.
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, N> st;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    if (shape[d] == 0) return;
    bool merge = !sizes.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      merge = st[k].back() == (*strides[k])[static_cast<size_t>(d)] * shape[d];
    }
    if (merge) {
      sizes.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = (*strides[k])[static_cast<size_t>(d)];
    } else {
      sizes.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back((*strides[k])[static_cast<size_t>(d)]);
    }
  }
  std::array<int64_t, N> offsets{};
  std::array<int64_t, N> inner{};
  if (sizes.empty()) {  // a single element
    fn(offsets, int64_t{1}, inner);
    return;
  }
  const size_t rank = sizes.size();
  for (size_t k = 0; k < N; ++k) inner[k] = st[k][rank - 1];
  const int64_t n = sizes[rank - 1];
  std::vector<int64_t> counter(rank, 0);
  while (true) {
    fn(offsets, n, inner);
    // Advance the outer dimensions like an odometer.
    size_t d = rank - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++counter[d] < sizes[d]) {
        for (size_t k = 0; k < N; ++k) offsets[k] += st[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) offsets[k] -= st[k][d] * (sizes[d] - 1);
      counter[d] = 0;
    }
  }
}

}  // namespace ag
