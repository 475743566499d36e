// Element types a Tensor can hold. The dtype is a run-time property: training runs in f32 and
// the numerical checks of autograd/ run the very same code in f64. Integer data (token ids,
// lengths) lives in `Indices` (indices.h), not in a Tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>

namespace ag {

enum class DType { f32, f64 };

constexpr std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return sizeof(float);
    case DType::f64: return sizeof(double);
  }
  return 0;
}

constexpr const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
  }
  return "?";
}

inline std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };

// Calls fn with a value of the C++ type matching `dtype` (0.0f or 0.0): kernels are written once
// as templates and dispatched here once per op.
//   dispatch(t.dtype(), [&]<typename T>(T) { ... });
template <typename Fn>
decltype(auto) dispatch(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
  }
  throw std::logic_error("dispatch: unknown dtype");
}

}  // namespace ag
