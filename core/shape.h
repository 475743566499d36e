// Shape: the sizes of a tensor's dimensions, outermost first (row-major, PyTorch order).
// Broadcasting follows NumPy/PyTorch: shapes are aligned at the right, and a dimension of
// size 1 stretches to match the other.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace ag {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t size() const { return rank(); }
  bool empty() const { return dims_.empty(); }
  // Negative axes count from the end, as in PyTorch.
  int64_t operator[](int64_t axis) const { return dims_[static_cast<size_t>(axis < 0 ? axis + rank() : axis)]; }
  int64_t& operator[](int64_t axis) { return dims_[static_cast<size_t>(axis < 0 ? axis + rank() : axis)]; }
  int64_t back() const { return dims_.back(); }
  // The element count. std::invalid_argument when a dimension is negative or the product does
  // not fit int64 (the message names `op` and the shape); numel() names "Shape::numel".
  int64_t numel() const { return checked_numel("Shape::numel"); }
  int64_t checked_numel(const char* op) const;

  const std::vector<int64_t>& dims() const { return dims_; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }
  void push_back(int64_t d) { dims_.push_back(d); }

  friend bool operator==(const Shape&, const Shape&) = default;

  std::string str() const;  // "(2, 3)"

 private:
  std::vector<int64_t> dims_;
};

std::ostream& operator<<(std::ostream& os, const Shape& shape);

// The broadcast of a and b; throws std::invalid_argument naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");

// True when `from` can be expanded to `to` by broadcasting (not the other way around).
bool broadcastable_to(const Shape& from, const Shape& to);

// Maps a possibly negative axis into [0, rank); throws std::invalid_argument naming `op`.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* op);
// The same for an axis of a tensor of `shape`; the message names the shape.
int64_t normalize_axis(int64_t axis, const Shape& shape, const char* op);

// Row-major strides of a contiguous tensor of this shape, in elements.
std::vector<int64_t> contiguous_strides(const Shape& shape);

}  // namespace ag
