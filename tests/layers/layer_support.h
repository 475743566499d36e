// Helpers for the layer tests: seeded tensors, gradient checks over a module's parameters, and
// attention composed from primitives (the reference the fused paths are held equal to).
#pragma once

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attograd.h"
#include "support.h"

namespace ag::testing {

inline Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Generator gen(seed);
  return normal(shape, 0.0, 1.0, gen, dtype);
}

// Converts `module` to f64 and gradient-checks `fn` on `inputs` and every trainable parameter.
inline void check_module_gradients(Module& module, const GradcheckFn& fn, const std::vector<Variable>& inputs,
                                   const std::vector<Variable>& zero_ok = {}, GradcheckOptions options = {}) {
  module.to(DType::f64);
  options.params.clear();
  for (const Variable& p : module.parameters()) {
    if (p.requires_grad()) options.params.push_back(p);
  }
  BOOST_REQUIRE(!options.params.empty() || !inputs.empty());
  options.zero_ok = zero_ok;
  check_gradients(fn, inputs, options);
}

inline bool all_finite(const Tensor& t) {
  for (double v : t.to_vector()) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

// Every parameter that received a gradient has a finite one; returns how many received one.
inline int finite_parameter_grads(const Module& module) {
  int n = 0;
  for (const auto& [name, p] : module.named_parameters()) {
    if (!p.grad().defined()) continue;
    ++n;
    BOOST_TEST(all_finite(p.grad()), "gradient of " << name << " is not finite");
  }
  return n;
}

struct ComposedAttention {
  Variable output;   // (B, H, Tq, Dv)
  Variable weights;  // (B, H, Tq, Tk)
};

// softmax(scale * q k^T + bias, masked where keep == 0) v, from matmul, masked_fill and softmax.
inline ComposedAttention composed_attention(const Variable& q, const Variable& k, const Variable& v, const Tensor& keep,
                                            const Variable& bias, double scale) {
  Variable scores = matmul(q, transpose(k, -2, -1)) * scale;
  if (bias.defined()) scores = scores + bias;
  if (keep.defined()) {
    const Tensor hidden = kernels::affine(keep.to(q.dtype()), -1.0, 1.0);  // 1 where keep is 0
    scores = masked_fill(scores, hidden, -std::numeric_limits<double>::infinity());
  }
  const Variable weights = softmax(scores, -1);
  return {matmul(weights, v), weights};
}

// A small block for the transformer tests (test_transformer.cpp, test_sublayers.cpp).
inline TransformerBlockOptions small_block(bool norm_first, double dropout = 0.1) {
  return {.d_model = 8, .n_head = 2, .d_ff = 12, .dropout = dropout, .norm_first = norm_first};
}

// The block's formula, written from its children (dropout off).
inline Variable block_formula(TransformerBlock& block, const Variable& x, const AttentionMask& mask) {
  if (block.options().norm_first) {
    const Variable h = x + block.attn().forward(block.norm1()(x), mask).output;
    return h + block.ff()(block.norm2()(h));
  }
  const Variable h = block.norm1()(x + block.attn().forward(x, mask).output);
  return block.norm2()(h + block.ff()(h));
}

}  // namespace ag::testing
