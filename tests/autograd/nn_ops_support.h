// Helpers for test_nn_ops.cpp: closed-form inputs shared with reference_nn_ops.py, the
// fused == composed comparison (the twins themselves are library code: autograd/composed.h).
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attograd/autograd/composed.h"
#include "support.h"

namespace ag::testing {

constexpr double kTwinTol = 1e-12;  // fused vs composed, and vs PyTorch, in f64

// amp * sin(a * i + b) + shift over the row-major index i (the Python script's `wave`).
inline Tensor wave(const Shape& shape, double a, double b, double amp = 1.0, double shift = 0.0) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = amp * std::sin(a * static_cast<double>(i) + b) + shift;
  return from_vector(v, shape, DType::f64);
}

inline Variable leaf(const Tensor& t, const std::string& name = {}) { return Variable(t, true, name); }

// A leaf holding `shape` as a transposed (non-contiguous) view of its axes a and b.
inline Variable transposed_leaf(Shape shape, int64_t a, int64_t b, uint64_t seed) {
  std::swap(shape[a], shape[b]);
  Generator gen(seed);
  return leaf(normal(shape, 0.0, 1.0, gen, DType::f64).transpose(a, b));
}

inline void check_values(const Tensor& got, const std::vector<double>& expected, double tol,
                         const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_REQUIRE_EQUAL(got.numel(), static_cast<int64_t>(expected.size()));
    const std::vector<double> g = got.to_vector();
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - expected[i]));
    BOOST_TEST(worst <= tol, what << ": max |diff| " << worst << " > " << tol);
  }
}

// The output and the gradients of `leaves` after backward with `upstream` (undefined: ones).
inline std::vector<Tensor> value_and_grads(const std::function<Variable()>& f, const std::vector<Variable>& leaves,
                                           const Tensor& upstream) {
  for (Variable l : leaves) l.zero_grad();
  const Variable y = f();
  y.backward(upstream.defined() ? upstream : ones(y.shape(), y.dtype()));
  std::vector<Tensor> out{y.value()};
  for (const Variable& l : leaves) out.push_back(l.grad().defined() ? l.grad() : zeros(l.shape(), l.dtype()));
  return out;
}

// Fused and composed twins agree in value and in every gradient.
inline void check_twins(const std::function<Variable()>& fused, const std::function<Variable()>& composed,
                        const std::vector<Variable>& leaves, const Tensor& upstream = Tensor()) {
  const std::vector<Tensor> a = value_and_grads(fused, leaves, upstream);
  const std::vector<Tensor> b = value_and_grads(composed, leaves, upstream);
  for (size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST(max_abs_diff(a[i], b[i]) <= kTwinTol, (i == 0 ? std::string("output") : "grad " + std::to_string(i - 1))
                                                         << " differs by " << max_abs_diff(a[i], b[i]));
  }
}

// 1 where key j < lengths[b]: a key-padding keep mask of shape (B, 1, 1, Tk).
inline Tensor key_padding(const std::vector<int64_t>& lengths, int64_t tk) {
  Tensor keep = zeros({static_cast<int64_t>(lengths.size()), 1, 1, tk}, DType::f64);
  for (size_t b = 0; b < lengths.size(); ++b) {
    for (int64_t j = 0; j < lengths[b]; ++j) keep.set({static_cast<int64_t>(b), 0, 0, j}, 1.0);
  }
  return keep;
}

inline Tensor causal(int64_t t) {
  Tensor keep = zeros({t, t}, DType::f64);
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j <= i; ++j) keep.set({i, j}, 1.0);
  }
  return keep;
}

}  // namespace ag::testing
