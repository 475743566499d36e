// Fused neural-network ops: forward and hand-written backward in one kernel each, for speed
// and memory. Each has a composed twin built from the primitives in ops.h, and tests hold the
// two equal (tests/autograd/test_nn_ops.cpp).
#pragma once

#include <cstdint>

#include "autograd/variable.h"
#include "core/indices.h"
#include "core/rng.h"

namespace ag {

// ---- layer norm (ops/layer_norm.cpp) ----
// x: (..., *normalized) -> same shape, normalised over the last `normalized_dims` axes.
// weight, bias: shape `normalized` (either may be undefined: no affine part).
// Saves x-hat statistics (mean, rstd) for backward.
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, int64_t normalized_dims,
                    double eps = 1e-5);

// ---- dropout (ops/dropout.cpp) ----
// Inverted dropout: each element is kept with probability 1 - p and scaled by 1 / (1 - p).
// Identity when !training or p == 0; zero when p == 1. The mask comes from one stream of
// `gen` (seed, step, call), so replaying the generator state replays the mask.
Variable dropout(const Variable& x, double p, bool training, Generator& gen = default_generator());

// ---- embedding (ops/embedding.cpp) ----
// weight: (num, dim), ids: any shape with values in [0, num) -> (*ids.shape, dim).
// Rows equal to padding_idx (if >= 0) read normally but receive no gradient.
Variable embedding(const Variable& weight, const Indices& ids, int64_t padding_idx = -1);

// ---- cross-entropy (ops/cross_entropy.cpp): log-softmax and NLL fused ----
enum class Reduction { mean, sum, none };
struct CrossEntropyOptions {
  int64_t ignore_index = -100;   // targets equal to it contribute nothing (and are not counted)
  double label_smoothing = 0.0;  // in [0, 1], PyTorch's definition
  Reduction reduction = Reduction::mean;  // mean over non-ignored targets
};
// logits: (..., C), targets: (...) with values in [0, C) or ignore_index.
// Returns a scalar for mean/sum, shape (...) for none.
Variable cross_entropy(const Variable& logits, const Indices& targets, const CrossEntropyOptions& options = {});

// ---- scaled dot-product attention (ops/attention.cpp) ----
// q: (B, H, Tq, Dk), k: (B, H, Tk, Dk), v: (B, H, Tk, Dv) -> (B, H, Tq, Dv)
//   weights = softmax(scale * q k^T + bias, where keep) ; output = dropout(weights) v
// keep: optional 0/1 tensor broadcastable to (B, H, Tq, Tk); 0 means "this key is not seen".
// bias: optional additive variable broadcastable to (B, H, Tq, Tk) (it receives a gradient).
// A query row whose keys are all masked gets all-zero weights, a zero output and zero, finite
// gradients (PyTorch gives NaN there).
struct AttentionOptions {
  double scale = 0.0;  // 0 means 1 / sqrt(Dk)
  double dropout = 0.0;
  bool training = false;
  Generator* generator = nullptr;  // default_generator() when null
};
struct AttentionResult {
  Variable output;
  Tensor weights;  // (B, H, Tq, Tk) after masking and softmax, before dropout; not differentiable
};
AttentionResult scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const Tensor& keep = Tensor(), const Variable& bias = Variable(),
                                             const AttentionOptions& options = {});

}  // namespace ag
