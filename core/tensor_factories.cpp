// The factories (empty, zeros, full, arange, from_vector, uniform, normal) and the two helpers
// that loaders use to name a bad element (core/tensor.h). Every one checks its shape's element
// count and byte size before allocating, through Tensor's constructor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "attograd/core/parallel.h"
#include "attograd/core/skip_init.h"
#include "attograd/core/tensor.h"

namespace ag {

Tensor empty(const Shape& shape, DType dtype) { return Tensor(shape, dtype, "empty"); }

Tensor zeros(const Shape& shape, DType dtype) {
  Tensor t(shape, dtype, "zeros");
  std::memset(t.raw_data(), 0, static_cast<size_t>(t.numel()) * dtype_size(dtype));
  return t;
}

Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t(shape, dtype, "full");
  t.fill_(value);
  return t;
}

Tensor scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor arange(double start, double end, double step, DType dtype) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
    throw std::invalid_argument("arange: invalid range start=" + std::to_string(start) + " end=" +
                                std::to_string(end) + " step=" + std::to_string(step));
  }
  const double count = std::ceil((end - start) / step);
  if (!(count < 9.0e18)) {
    throw std::invalid_argument("arange: start=" + std::to_string(start) + " end=" + std::to_string(end) + " step=" +
                                std::to_string(step) + " gives more elements than fit in 64 bits");
  }
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  Tensor t(Shape{n}, dtype, "arange");
  dispatch(dtype, [&]<typename T>(T) {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

namespace {
template <typename V>
Tensor from_values(const std::vector<V>& values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != shape.checked_numel("from_vector")) {
    throw std::invalid_argument("from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
                                shape.str() + " (" + std::to_string(shape.numel()) + " elements)");
  }
  Tensor t(shape, dtype);
  dispatch(dtype, [&]<typename T>(T) {
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return t;
}
}  // namespace

int64_t first_value_outside(const Tensor& t, double low, double high) {
  if (!t.defined()) throw std::logic_error("first_value_outside: the tensor is undefined");
  const Tensor c = t.contiguous();
  return dispatch(c.dtype(), [&]<typename T>(T) -> int64_t {
    const T* p = c.data<T>();
    for (int64_t i = 0; i < c.numel(); ++i) {
      const double v = static_cast<double>(p[i]);
      if (!(v >= low && v <= high)) return i;  // NaN fails both comparisons
    }
    return -1;
  });
}

std::string index_str(const Shape& shape, int64_t flat) {
  std::vector<int64_t> coords(static_cast<size_t>(shape.rank()));
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    const int64_t n = shape[d] > 0 ? shape[d] : 1;
    coords[static_cast<size_t>(d)] = flat % n;
    flat /= n;
  }
  return Shape(std::move(coords)).str();
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  return from_values(values, shape, dtype);
}
Tensor from_vector(const std::vector<float>& values, const Shape& shape, DType dtype) {
  return from_values(values, shape, dtype);
}

// What one random draw costs, in the flops parallel_chunks() weighs work by (a counter hash, and
// for normal() a logarithm, a square root and a cosine): large initialisations are split over
// the pool, a layer's small ones stay on the calling thread.
constexpr double kDrawCost = 40;

namespace {
thread_local bool skip_init = false;
}  // namespace

SkipInitGuard::SkipInitGuard() : previous_(skip_init) { skip_init = true; }
SkipInitGuard::~SkipInitGuard() { skip_init = previous_; }
bool init_skipped() { return skip_init; }

// Under a SkipInitGuard (core/skip_init.h) both give zeros and draw nothing.
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  if (!(low <= high) || !std::isfinite(low) || !std::isfinite(high)) {
    throw std::invalid_argument("uniform: need finite low <= high, got low=" + std::to_string(low) +
                                " high=" + std::to_string(high));
  }
  if (init_skipped()) return zeros(shape, dtype);
  Tensor t(shape, dtype, "uniform");
  const uint64_t key = gen.next_stream();
  dispatch(dtype, [&]<typename T>(T) {
    T* p = t.data<T>();
    // A draw just below 1 can round up to `high` in T (f32 especially): keep it below.
    const T top = static_cast<T>(high);
    const T below_top = std::nextafter(top, static_cast<T>(low));
    // Element i is a function of (key, i) alone, so the pieces may be filled on any threads.
    const int64_t n = t.numel();
    parallel_for(n, parallel_chunks(n, kDrawCost * static_cast<double>(n)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T v = static_cast<T>(low + (high - low) * Generator::uniform_f64(key, static_cast<uint64_t>(i)));
        p[i] = v < top || low == high ? v : below_top;
      }
    });
  });
  return t;
}

Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype) {
  if (!(std >= 0) || !std::isfinite(mean) || !std::isfinite(std)) {
    throw std::invalid_argument("normal: need finite mean and std >= 0, got mean=" + std::to_string(mean) +
                                " std=" + std::to_string(std));
  }
  if (init_skipped()) return zeros(shape, dtype);
  Tensor t(shape, dtype, "normal");
  const uint64_t key = gen.next_stream();
  dispatch(dtype, [&]<typename T>(T) {
    T* p = t.data<T>();
    const int64_t n = t.numel();
    parallel_for(n, parallel_chunks(n, kDrawCost * static_cast<double>(n)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        p[i] = static_cast<T>(mean + std * Generator::normal(key, static_cast<uint64_t>(i)));
      }
    });
  });
  return t;
}

}  // namespace ag
