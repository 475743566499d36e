// Indices: integer data with a shape (token ids, class targets, sequence lengths).
// Kept apart from Tensor so that every numeric kernel deals with floating point only.
#pragma once

#include <cstdint>
#include <vector>

#include "attograd/core/shape.h"

namespace ag {

struct Indices {
  Shape shape;
  std::vector<int64_t> data;  // row-major, shape.numel() entries

  Indices() = default;
  Indices(Shape s, std::vector<int64_t> d);  // throws std::invalid_argument on a size mismatch
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int64_t operator[](int64_t i) const { return data[static_cast<size_t>(i)]; }
};

}  // namespace ag
