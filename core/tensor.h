// Tensor: a typed, strided view of a shared Storage.
//
//   element (i0, i1, ..., ik) lives at  data + offset + i0*stride[0] + ... + ik*stride[k]
//
// Views (reshape of contiguous data, transpose, permute, slice/narrow, unsqueeze, squeeze,
// expand) only change shape/strides/offset and share the storage: they are O(1) and writing
// through one is visible through the others. Kernels read any strides; what they return is
// always a new contiguous tensor. `contiguous()` copies only when needed; `clone()` always does.
//
// A default-constructed Tensor is "undefined" (no storage); most calls on it throw.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "attograd/core/dtype.h"
#include "attograd/core/rng.h"
#include "attograd/core/shape.h"
#include "attograd/core/storage.h"

namespace ag {

class Tensor {
 public:
  Tensor() = default;
  // A new contiguous tensor with uninitialised contents. A shape whose element count or byte
  // size does not fit 64 bits is std::invalid_argument, memory the system refuses OutOfMemory;
  // both messages start with `op` and name the shape.
  Tensor(Shape shape, DType dtype, const char* op = "Tensor");
  // A view of existing storage.
  Tensor(std::shared_ptr<Storage> storage, Shape shape, std::vector<int64_t> strides,
         int64_t offset, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return shape_.rank(); }
  int64_t size(int64_t axis) const;
  int64_t numel() const { return shape_.numel(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool shares_storage_with(const Tensor& other) const { return storage_ && storage_ == other.storage_; }

  // Typed pointer to element (0, ..., 0). Throws std::invalid_argument if T is not the dtype.
  template <typename T> T* data();
  template <typename T> const T* data() const;
  void* raw_data();
  const void* raw_data() const;

  // ---- views (no copy) ----
  // `view` needs contiguous data and throws otherwise; `reshape` copies when it must.
  // One dimension may be -1 and is inferred.
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor flatten() const { return reshape({numel()}); }
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor t() const;  // transpose of the last two dimensions
  Tensor permute(const std::vector<int64_t>& order) const;
  // Elements start, start+step, ... < end along `axis` (negative start/end count from the end).
  Tensor slice(int64_t axis, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t axis, int64_t start, int64_t length) const;
  Tensor select(int64_t axis, int64_t index) const;  // drops `axis`
  Tensor unsqueeze(int64_t axis) const;
  Tensor squeeze(int64_t axis) const;  // axis must have size 1
  Tensor squeeze() const;              // every size-1 axis
  // Broadcast to `shape` with stride 0 on stretched dimensions (read-only in spirit).
  Tensor expand(const Shape& shape) const;

  // ---- copies ----
  Tensor contiguous() const;  // *this if already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(DType dtype) const;  // *this if the dtype already matches

  // ---- element access (for tests, printing and small host-side work; not for kernels) ----
  double item() const;                                   // numel() == 1
  double at(std::initializer_list<int64_t> index) const;  // bounds-checked
  void set(std::initializer_list<int64_t> index, double value);
  std::vector<double> to_vector() const;                 // row-major logical order

  // ---- in place ----
  Tensor& fill_(double value);
  // Copies `src` (same shape, or broadcastable to ours; any dtype) into this tensor's elements.
  // A source that overlaps this tensor (x.copy_(x.t())) is read in full before anything is
  // written, as if it were a separate tensor (see memory_overlap below).
  Tensor& copy_(const Tensor& src);

  std::string str(int64_t max_per_dim = 6) const;  // shape, dtype and (elided) values

 private:
  void require_defined(const char* op) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  std::vector<int64_t> strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Whether the elements of `a` and `b` can share memory: `none` (other storage, or spans of
// memory that do not meet), `same` (one layout: the same elements in the same order, where an
// elementwise op in place reads each element just before it writes it), or `partial` (anything
// else, e.g. a view and its transpose; interleaved views that never meet count too, which costs
// them a copy). In-place ops (Tensor::copy_, kernels::add_, kernels::matmul_add_) read a source
// that overlaps their destination otherwise than `same` from a copy of it.
enum class MemoryOverlap { none, same, partial };
MemoryOverlap memory_overlap(const Tensor& a, const Tensor& b);

// ---- factories ----
Tensor empty(const Shape& shape, DType dtype = DType::f32);
Tensor zeros(const Shape& shape, DType dtype = DType::f32);
Tensor ones(const Shape& shape, DType dtype = DType::f32);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
Tensor scalar(double value, DType dtype = DType::f32);  // shape ()
// start, start+step, ... < end
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32);
inline Tensor arange(int64_t n, DType dtype = DType::f32) { return arange(0.0, static_cast<double>(n), 1.0, dtype); }
// Throws std::invalid_argument if values.size() != shape.numel().
Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f32);

// The row-major (flat) index of the first element that is NaN or outside [low, high], or -1
// when there is none: how loaders find the value that makes a file unusable.
int64_t first_value_outside(const Tensor& t, double low, double high);
// A flat row-major index as coordinates of `shape`: 7 in (2, 3, 2) -> "(1, 0, 1)".
std::string index_str(const Shape& shape, int64_t flat);
Tensor from_vector(const std::vector<float>& values, const Shape& shape, DType dtype = DType::f32);
// Uniform in [low, high) and normal(mean, std), drawn from `gen` (one stream per call).
Tensor uniform(const Shape& shape, double low, double high, Generator& gen = default_generator(),
               DType dtype = DType::f32);
Tensor normal(const Shape& shape, double mean, double std, Generator& gen = default_generator(),
              DType dtype = DType::f32);

// ---- template definitions ----
template <typename T>
T* Tensor::data() {
  require_defined("data");
  if (dtype_of<T>::value != dtype_) {
    throw std::invalid_argument(std::string("data: tensor has dtype ") + dtype_name(dtype_) +
                                ", asked for " + dtype_name(dtype_of<T>::value));
  }
  return static_cast<T*>(storage_->data()) + offset_;
}

template <typename T>
const T* Tensor::data() const {
  return const_cast<Tensor*>(this)->data<T>();
}

}  // namespace ag
