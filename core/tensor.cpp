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
