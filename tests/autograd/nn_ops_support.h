// Helpers for test_nn_ops.cpp: closed-form inputs shared with reference_nn_ops.py, the
// fused == composed comparison, and the composed twins of the fused ops, written with the
// primitives of autograd/ops.h only.
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

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

// ---- composed twins ----

inline Variable composed_layer_norm(const Variable& x, const Variable& w, const Variable& b, int64_t dims, double eps) {
  std::vector<int64_t> axes;
  for (int64_t d = x.dim() - dims; d < x.dim(); ++d) axes.push_back(d);
  const Variable centred = x - mean(x, axes, true);
  const Variable var = mean(centred * centred, axes, true);
  Variable y = centred / sqrt(var + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

// log_softmax, then the target's log-probability picked by a one-hot mask.
inline Variable composed_cross_entropy(const Variable& logits, const Indices& targets, const CrossEntropyOptions& o) {
  const int64_t classes = logits.shape()[-1];
  Tensor onehot = zeros(logits.shape(), logits.dtype());
  Tensor valid = zeros(targets.shape, logits.dtype());
  Tensor onehot_flat = onehot.view({-1, classes});
  Tensor valid_flat = valid.view({-1});
  int64_t count = 0;
  for (int64_t r = 0; r < targets.numel(); ++r) {
    if (targets[r] == o.ignore_index) continue;
    onehot_flat.set({r, targets[r]}, 1.0);
    valid_flat.set({r}, 1.0);
    ++count;
  }
  const Variable logp = log_softmax(logits, -1);
  const Variable nll = neg(sum(logp * Variable(onehot), {-1}));
  const Variable smooth = neg(mean(logp, {-1}));
  const Variable row = (nll * (1 - o.label_smoothing) + smooth * o.label_smoothing) * Variable(valid);
  switch (o.reduction) {
    case Reduction::none: return row;
    case Reduction::sum: return sum(row);
    case Reduction::mean: return sum(row) / static_cast<double>(count);
  }
  return row;
}

// matmul + masked_fill + softmax (+ dropout) + matmul, from the primitives.
inline Variable composed_attention(const Variable& q, const Variable& k, const Variable& v, const Tensor& keep,
                                   const Variable& bias, const AttentionOptions& o) {
  const double scale = o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(q.shape()[3]));
  Variable scores = matmul(q, transpose(k, -2, -1)) * scale;
  if (bias.defined()) scores = scores + bias;
  if (keep.defined()) {
    scores = masked_fill(scores, kernels::affine(keep, -1.0, 1.0), -std::numeric_limits<double>::infinity());
  }
  Variable weights = softmax(scores, -1);
  if (o.training && o.dropout > 0) weights = dropout(weights, o.dropout, true);
  return matmul(weights, v);
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
