#include "attograd/core/shape.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace ag {

int64_t Shape::checked_numel(const char* op) const {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dims_) {
    if (d < 0) throw std::invalid_argument(std::string(op) + ": negative dimension in shape " + str());
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  // A zero anywhere makes the product 0, however large the others are.
  if (overflow && std::find(dims_.begin(), dims_.end(), 0) == dims_.end()) {
    throw std::invalid_argument(std::string(op) + ": shape " + str() + " has more elements than fit in 64 bits");
  }
  return overflow ? 0 : n;
}

std::string Shape::str() const {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < dims_.size(); ++i) os << (i ? ", " : "") << dims_[i];
  if (dims_.size() == 1) os << ',';
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.str(); }

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int64_t rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    const int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    if (da != db && da != 1 && db != 1) {
      throw std::invalid_argument(std::string(op) + ": shapes do not broadcast: a=" + a.str() +
                                  " b=" + b.str() + " (dimension " + std::to_string(i) + ": " +
                                  std::to_string(da) + " vs " + std::to_string(db) + ")");
    }
    out[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(std::move(out));
}

bool broadcastable_to(const Shape& from, const Shape& to) {
  if (from.rank() > to.rank()) return false;
  const int64_t lead = to.rank() - from.rank();
  for (int64_t i = 0; i < from.rank(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* op) {
  if (axis < -rank || axis >= rank) {
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) +
                                " is out of range for a tensor of rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

int64_t normalize_axis(int64_t axis, const Shape& shape, const char* op) {
  if (axis < -shape.rank() || axis >= shape.rank()) {
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                                shape.str());
  }
  return axis < 0 ? axis + shape.rank() : axis;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(static_cast<size_t>(shape.rank()));
  int64_t s = 1;
  for (int64_t i = shape.rank() - 1; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = s;
    s *= shape[i];
  }
  return strides;
}

}  // namespace ag
