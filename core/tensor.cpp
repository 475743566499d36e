// Tensor: construction, copies between dtypes and layouts (memory_overlap, copy_, clone, to),
// element access and printing. The views (view, reshape, transpose, slice, expand, ...) are in
// tensor_views.cpp.
#include "attograd/core/tensor.h"

#include <algorithm>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "attograd/core/indices.h"
#include "attograd/core/strided.h"

namespace ag {

namespace {

std::string vec_str(const std::vector<int64_t>& v) { return Shape(v).str(); }

template <typename Dst, typename Src>
void copy_strided(Dst* dst, const std::vector<int64_t>& dst_strides, const Src* src,
                  const std::vector<int64_t>& src_strides, const Shape& shape) {
  for_each_row<2>(shape, {&dst_strides, &src_strides}, [&](auto off, int64_t n, auto inner) {
    Dst* d = dst + off[0];
    const Src* s = src + off[1];
    if (inner[0] == 1 && inner[1] == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<Dst>(s[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * inner[0]] = static_cast<Dst>(s[i * inner[1]]);
    }
  });
}

}  // namespace

Indices::Indices(Shape s, std::vector<int64_t> d) : shape(std::move(s)), data(std::move(d)) {
  if (shape.numel() != static_cast<int64_t>(data.size())) {
    throw std::invalid_argument("Indices: shape " + shape.str() + " holds " + std::to_string(shape.numel()) +
                                " elements but " + std::to_string(data.size()) + " values were given");
  }
}

Tensor::Tensor(Shape shape, DType dtype, const char* op)
    : shape_(std::move(shape)), dtype_(dtype) {
  // Every size is checked before anything is allocated: a count that wrapped around would
  // allocate a small block and let the kernels write far past it.
  const int64_t n = shape_.checked_numel(op);
  const int64_t max_elements = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(dtype));
  if (n > max_elements) {
    throw std::invalid_argument(std::string(op) + ": a " + dtype_name(dtype) + " tensor of shape " + shape_.str() +
                                " needs more bytes than fit in 64 bits");
  }
  strides_ = contiguous_strides(shape_);
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  try {
    storage_ = std::make_shared<Storage>(bytes);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(std::string(op) + ": out of memory for a " + dtype_name(dtype) + " tensor of shape " +
                      shape_.str() + " (" + format_bytes(static_cast<double>(bytes)) + ")");
  }
}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, std::vector<int64_t> strides,
               int64_t offset, DType dtype)
    : storage_(std::move(storage)), shape_(std::move(shape)), strides_(std::move(strides)),
      offset_(offset), dtype_(dtype) {
  if (static_cast<int64_t>(strides_.size()) != shape_.rank()) {
    throw std::invalid_argument("Tensor: shape " + shape_.str() + " and strides " + vec_str(strides_) +
                                " have different ranks");
  }
}

void Tensor::require_defined(const char* op) const {
  if (!defined()) throw std::logic_error(std::string(op) + ": the tensor is undefined (default-constructed)");
}

int64_t Tensor::size(int64_t axis) const { return shape_[normalize_axis(axis, shape_, "size")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[static_cast<size_t>(i)] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::raw_data() {
  require_defined("raw_data");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

const void* Tensor::raw_data() const { return const_cast<Tensor*>(this)->raw_data(); }

Tensor Tensor::contiguous() const {
  require_defined("contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  require_defined("clone");
  Tensor out(shape_, dtype_);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  require_defined("to");
  if (dtype == dtype_) return *this;
  Tensor out(shape_, dtype);
  out.copy_(*this);
  return out;
}

namespace {
// The bytes [first, last] of the storage that `t`'s elements lie in (t.numel() > 0).
std::pair<int64_t, int64_t> byte_span(const Tensor& t) {
  int64_t first = t.offset(), last = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.shape()[d] - 1) * t.strides()[static_cast<size_t>(d)];
    (reach < 0 ? first : last) += reach;
  }
  const auto bytes = static_cast<int64_t>(dtype_size(t.dtype()));
  return {first * bytes, last * bytes + bytes - 1};
}
}  // namespace

MemoryOverlap memory_overlap(const Tensor& a, const Tensor& b) {
  if (!a.shares_storage_with(b) || a.numel() == 0 || b.numel() == 0) return MemoryOverlap::none;
  const auto [a_first, a_last] = byte_span(a);
  const auto [b_first, b_last] = byte_span(b);
  if (a_last < b_first || b_last < a_first) return MemoryOverlap::none;
  const bool same = a.dtype() == b.dtype() && a.offset() == b.offset() && a.shape() == b.shape() &&
                    a.strides() == b.strides();
  return same ? MemoryOverlap::same : MemoryOverlap::partial;
}

Tensor& Tensor::copy_(const Tensor& src) {
  require_defined("copy_");
  src.require_defined("copy_");
  if (!broadcastable_to(src.shape(), shape_)) {
    throw std::invalid_argument("copy_: source of shape " + src.shape().str() + " cannot be written into shape " +
                                shape_.str());
  }
  Tensor s = src.expand(shape_);
  // Written element by element, a source that overlaps us would be read after it was changed.
  if (memory_overlap(*this, s) == MemoryOverlap::partial) s = s.clone();
  dispatch(dtype_, [&]<typename D>(D) {
    dispatch(s.dtype(), [&]<typename S>(S) { copy_strided(data<D>(), strides_, s.data<S>(), s.strides(), shape_); });
  });
  return *this;
}

Tensor& Tensor::fill_(double value) {
  require_defined("fill_");
  dispatch(dtype_, [&]<typename T>(T) {
    T* base = data<T>();
    const T v = static_cast<T>(value);
    for_each_row<1>(shape_, {&strides_}, [&](auto off, int64_t n, auto inner) {
      for (int64_t i = 0; i < n; ++i) base[off[0] + i * inner[0]] = v;
    });
  });
  return *this;
}

double Tensor::item() const {
  require_defined("item");
  if (numel() != 1) {
    throw std::invalid_argument("item: needs a tensor with one element, got shape " + shape_.str());
  }
  return dispatch(dtype_, [&]<typename T>(T) { return static_cast<double>(*data<T>()); });
}

namespace {
int64_t checked_offset(const Tensor& t, std::initializer_list<int64_t> index, const char* op) {
  if (static_cast<int64_t>(index.size()) != t.dim()) {
    throw std::invalid_argument(std::string(op) + ": index " + vec_str(std::vector<int64_t>(index)) +
                                " has the wrong rank for shape " + t.shape().str());
  }
  int64_t off = 0;
  int64_t d = 0;
  for (int64_t i : index) {
    if (i < 0 || i >= t.shape()[d]) {
      throw std::invalid_argument(std::string(op) + ": index " + vec_str(std::vector<int64_t>(index)) +
                                  " is out of bounds for shape " + t.shape().str());
    }
    off += i * t.strides()[static_cast<size_t>(d)];
    ++d;
  }
  return off;
}
}  // namespace

double Tensor::at(std::initializer_list<int64_t> index) const {
  require_defined("at");
  const int64_t off = checked_offset(*this, index, "at");
  return dispatch(dtype_, [&]<typename T>(T) { return static_cast<double>(data<T>()[off]); });
}

void Tensor::set(std::initializer_list<int64_t> index, double value) {
  require_defined("set");
  const int64_t off = checked_offset(*this, index, "set");
  dispatch(dtype_, [&]<typename T>(T) { data<T>()[off] = static_cast<T>(value); });
}

std::vector<double> Tensor::to_vector() const {
  require_defined("to_vector");
  Tensor c = to(DType::f64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + numel());
}

std::string Tensor::str(int64_t max_per_dim) const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << shape_ << ", dtype=" << dtype_name(dtype_) << ")\n";
  const std::vector<double> v = to_vector();
  os << std::setprecision(dtype_ == DType::f32 ? 5 : 8);
  // Recursive print with elision: at most max_per_dim entries per dimension (head and tail).
  const auto print = [&](auto&& self, int64_t d, int64_t base, int indent) -> void {
    if (d == dim()) {
      os << v[static_cast<size_t>(base)];
      return;
    }
    const int64_t n = shape_[d];
    const int64_t inner = Shape(std::vector<int64_t>(shape_.begin() + d + 1, shape_.end())).numel();
    os << '[';
    for (int64_t i = 0; i < n; ++i) {
      if (n > max_per_dim && i == max_per_dim / 2) {
        os << (d + 1 == dim() ? "..., " : "...,\n" + std::string(static_cast<size_t>(indent + 1), ' '));
        i = n - max_per_dim / 2 - 1;
        continue;
      }
      self(self, d + 1, base + i * inner, indent + 1);
      if (i + 1 < n) os << (d + 1 == dim() ? ", " : ",\n" + std::string(static_cast<size_t>(indent + 1), ' '));
    }
    os << ']';
  };
  print(print, 0, 0, 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace ag
