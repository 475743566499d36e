// The composed twins of the fused ops: the same functions written with the elementary ops of
// ops.h (exp, sum, div, mean, matmul, masked_fill ...), whose derivatives the engine chains by
// itself. They are the teaching version: read them to see what a fused op computes, then
// autograd/ops/<op>.cpp to see how its hand-written backward gets the same numbers faster and
// with less memory. tests/autograd/test_nn_ops.cpp holds each fused op equal to its twin, in
// value and in every gradient, to 1e-12 in float64.
//
// The twins take the fused ops' arguments and follow their conventions, except where noted.
#pragma once

#include <cstdint>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"

namespace ag::composed {

// exp(x - m) / sum(exp(x - m)) along `axis`, m the row maximum (a constant: the shift changes
// no value and no gradient). Unlike ag::softmax, a row that is -inf everywhere gives NaN.
Variable softmax(const Variable& x, int64_t axis = -1);
// x - m - log(sum(exp(x - m))) along `axis`.
Variable log_softmax(const Variable& x, int64_t axis = -1);
// (x - mean) / sqrt(var + eps) * weight + bias over the last `normalized_dims` axes (biased
// variance); weight and bias may be undefined.
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, int64_t normalized_dims,
                    double eps);
// x * (mean(x^2) + eps)^(-1/2) * weight over the last axis; weight may be undefined.
Variable rms_norm(const Variable& x, const Variable& weight, double eps);
// x * cos + rotate_half(x) * sin, the tables' rows broadcast over batch and heads.
Variable rotary_embedding(const Variable& x, const Tensor& cos, const Tensor& sin, int64_t offset);
// silu(gate) * up.
Variable swiglu(const Variable& gate, const Variable& up);
// log_softmax, then each row's target log-probability picked with a one-hot mask, label
// smoothing mixed in, ignored rows zeroed, and the reduction.
Variable cross_entropy(const Variable& logits, const Indices& targets, const CrossEntropyOptions& options);
// q k^T * scale (+ bias), masked_fill where the mask's dense 0/1 equivalent (keep_tensor()) is
// 0, softmax (the fused op, so that a fully masked row gives zeros as in the fused attention),
// dropout, then the product with v. Keys and values with fewer heads than the queries
// (grouped-query attention) are copied to every query head of their group first.
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                      const AttentionMask& mask, const Variable& bias,
                                      const AttentionOptions& options);

}  // namespace ag::composed
