// Tensor's views: reshaping, transposing, slicing and broadcasting a tensor without copying its
// elements. Each returns a Tensor over the same storage with its own shape, strides and offset
// (core/tensor.h); copies and element access are in tensor.cpp.
#include <algorithm>
#include <stdexcept>

#include "attograd/core/tensor.h"

namespace ag {

namespace {

std::string vec_str(const std::vector<int64_t>& v) { return Shape(v).str(); }

// Resolves a single -1 in `shape` against `numel`; throws naming `op` on a mismatch.
Shape infer_shape(const Shape& shape, int64_t numel, const Shape& from, const char* op) {
  std::vector<int64_t> dims = shape.dims();
  int64_t known = 1;
  int64_t infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) {
        throw std::invalid_argument(std::string(op) + ": only one dimension may be -1, got " + shape.str() +
                                    " for a tensor of shape " + from.str());
      }
      infer = static_cast<int64_t>(i);
    } else if (dims[i] < 0) {
      throw std::invalid_argument(std::string(op) + ": negative dimension in " + shape.str() + " for a tensor of shape " +
                                  from.str());
    } else if (__builtin_mul_overflow(known, dims[i], &known)) {
      throw std::invalid_argument(std::string(op) + ": shape " + shape.str() + " has more elements than fit in 64 bits");
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      throw std::invalid_argument(std::string(op) + ": cannot reshape " + from.str() + " (" +
                                  std::to_string(numel) + " elements) to " + shape.str());
    }
    dims[static_cast<size_t>(infer)] = numel / known;
  } else if (known != numel) {
    throw std::invalid_argument(std::string(op) + ": cannot reshape " + from.str() + " (" +
                                std::to_string(numel) + " elements) to " + shape.str() + " (" +
                                std::to_string(known) + " elements)");
  }
  return Shape(std::move(dims));
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  require_defined("view");
  Shape target = infer_shape(shape, numel(), shape_, "view");
  if (!is_contiguous()) {
    throw std::invalid_argument("view: tensor of shape " + shape_.str() + " with strides " + vec_str(strides_) +
                                " is not contiguous; use reshape() (copies) or contiguous() first");
  }
  return Tensor(storage_, target, contiguous_strides(target), offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  require_defined("reshape");
  Shape target = infer_shape(shape, numel(), shape_, "reshape");
  if (is_contiguous()) return Tensor(storage_, target, contiguous_strides(target), offset_, dtype_);
  return contiguous().view(target);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  require_defined("transpose");
  a = normalize_axis(a, shape_, "transpose");
  b = normalize_axis(b, shape_, "transpose");
  Shape shape = shape_;
  std::vector<int64_t> strides = strides_;
  std::swap(shape[a], shape[b]);
  std::swap(strides[static_cast<size_t>(a)], strides[static_cast<size_t>(b)]);
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::t() const {
  if (dim() < 2) throw std::invalid_argument("t: needs at least 2 dimensions, got shape " + shape_.str());
  return transpose(-2, -1);
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  require_defined("permute");
  if (static_cast<int64_t>(order.size()) != dim()) {
    throw std::invalid_argument("permute: order " + vec_str(order) + " does not match shape " + shape_.str());
  }
  std::vector<bool> seen(order.size(), false);
  Shape shape;
  std::vector<int64_t> strides;
  for (int64_t axis : order) {
    const int64_t a = normalize_axis(axis, shape_, "permute");
    if (seen[static_cast<size_t>(a)]) {
      throw std::invalid_argument("permute: axis " + std::to_string(a) + " repeated in order " + vec_str(order) +
                                  " for shape " + shape_.str());
    }
    seen[static_cast<size_t>(a)] = true;
    shape.push_back(shape_[a]);
    strides.push_back(strides_[static_cast<size_t>(a)]);
  }
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t end, int64_t step) const {
  require_defined("slice");
  axis = normalize_axis(axis, shape_, "slice");
  const int64_t n = shape_[axis];
  if (step <= 0) {
    throw std::invalid_argument("slice: step must be positive, got " + std::to_string(step) + " (axis " +
                                std::to_string(axis) + " of shape " + shape_.str() + ")");
  }
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape shape = shape_;
  std::vector<int64_t> strides = strides_;
  shape[axis] = (end - start + step - 1) / step;
  strides[static_cast<size_t>(axis)] *= step;
  return Tensor(storage_, shape, strides, offset_ + start * strides_[static_cast<size_t>(axis)], dtype_);
}

Tensor Tensor::narrow(int64_t axis, int64_t start, int64_t length) const {
  require_defined("narrow");
  axis = normalize_axis(axis, shape_, "narrow");
  if (start < 0 || length < 0 || start + length > shape_[axis]) {
    throw std::invalid_argument("narrow: range [" + std::to_string(start) + ", " + std::to_string(start + length) +
                                ") is outside axis " + std::to_string(axis) + " of shape " + shape_.str());
  }
  return slice(axis, start, start + length);
}

Tensor Tensor::select(int64_t axis, int64_t index) const {
  require_defined("select");
  axis = normalize_axis(axis, shape_, "select");
  if (index < -shape_[axis] || index >= shape_[axis]) {
    throw std::invalid_argument("select: index " + std::to_string(index) + " is out of range for axis " +
                                std::to_string(axis) + " of shape " + shape_.str());
  }
  if (index < 0) index += shape_[axis];
  return narrow(axis, index, 1).squeeze(axis);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  require_defined("unsqueeze");
  if (axis < -(dim() + 1) || axis > dim()) {  // a new axis may also go after the last one
    throw std::invalid_argument("unsqueeze: axis " + std::to_string(axis) + " is out of range for shape " +
                                shape_.str() + " (a new axis goes at " + std::to_string(-(dim() + 1)) + " .. " +
                                std::to_string(dim()) + ")");
  }
  if (axis < 0) axis += dim() + 1;
  std::vector<int64_t> dims = shape_.dims();
  std::vector<int64_t> strides = strides_;
  const int64_t stride = axis < dim() ? strides_[static_cast<size_t>(axis)] * shape_[axis] : 1;
  dims.insert(dims.begin() + axis, 1);
  strides.insert(strides.begin() + axis, stride);
  return Tensor(storage_, Shape(dims), strides, offset_, dtype_);
}

Tensor Tensor::squeeze(int64_t axis) const {
  require_defined("squeeze");
  axis = normalize_axis(axis, shape_, "squeeze");
  if (shape_[axis] != 1) {
    throw std::invalid_argument("squeeze: axis " + std::to_string(axis) + " of shape " + shape_.str() +
                                " has size " + std::to_string(shape_[axis]) + ", not 1");
  }
  std::vector<int64_t> dims = shape_.dims();
  std::vector<int64_t> strides = strides_;
  dims.erase(dims.begin() + axis);
  strides.erase(strides.begin() + axis);
  return Tensor(storage_, Shape(dims), strides, offset_, dtype_);
}

Tensor Tensor::squeeze() const {
  require_defined("squeeze");
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  for (int64_t i = 0; i < dim(); ++i) {
    if (shape_[i] == 1) continue;
    dims.push_back(shape_[i]);
    strides.push_back(strides_[static_cast<size_t>(i)]);
  }
  return Tensor(storage_, Shape(dims), strides, offset_, dtype_);
}

Tensor Tensor::expand(const Shape& shape) const {
  require_defined("expand");
  if (!broadcastable_to(shape_, shape)) {
    throw std::invalid_argument("expand: shape " + shape_.str() + " cannot be broadcast to " + shape.str());
  }
  const int64_t lead = shape.rank() - dim();
  std::vector<int64_t> strides(static_cast<size_t>(shape.rank()), 0);
  for (int64_t i = 0; i < dim(); ++i) {
    strides[static_cast<size_t>(lead + i)] = shape_[i] == shape[lead + i] ? strides_[static_cast<size_t>(i)] : 0;
  }
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

}  // namespace ag
