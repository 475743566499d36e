// What the row-normalising ops (layer_norm.cpp, rms_norm.cpp) share: sums along a row in a
// fixed order, and the blocks of rows their backward sums weight gradients over. Internal, not
// installed.
#pragma once

#include <cstdint>

namespace ag::kernels {

// Row sums in kLanes interleaved partial sums, combined in a fixed order at the end. A single
// running sum is one chain of dependent additions that the compiler may not reorder (no
// fast-math), so it stays scalar; kLanes independent chains vectorise. The order is written
// here, not picked by the compiler or the thread count, so every run gives the same bits.
constexpr int64_t kLanes = 8;

template <typename Acc>
Acc combine_lanes(const Acc (&part)[kLanes], Acc tail) {
  return (((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]))) + tail;
}

// sum over j < n of term(j), in Acc.
template <typename Acc, typename Term>
Acc lane_sum(int64_t n, Term term) {
  Acc part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t k = 0; k < kLanes; ++k) part[k] += static_cast<Acc>(term(j + k));
  }
  Acc tail = 0;
  for (; j < n; ++j) tail += static_cast<Acc>(term(j));
  return combine_lanes(part, tail);
}

// A norm's backward cuts its rows into blocks of this many elements (at least one row): each
// block keeps its own weight-gradient column sums, added up in block order at the end. Blocks
// depend on the shape only, so 1 and 2 threads give the same bits.
constexpr int64_t kBackwardBlockElements = 16384;

}  // namespace ag::kernels
