// Attention masks with names instead of polarity conventions.
//
// An AttentionMask says which keys each query may see. It is built from what it means, never
// from a raw tensor whose 0s and 1s might mean either thing:
//   AttentionMask::causal(T)                  query t sees keys 0..t           (1, 1, T, T)
//   AttentionMask::key_padding(lengths, Tk)   batch b sees keys 0..lengths[b]-1 (B, 1, 1, Tk)
//   AttentionMask::keep(t)                    1 = seen, 0 = hidden; t broadcasts to (B, H, Tq, Tk)
//   a & b                                     seen only where both masks see it
// A default-constructed mask sees everything. keep_tensor() is the 0/1 tensor (rank 4, size 1
// on broadcast dimensions) that scaled_dot_product_attention takes as `keep`.
//
// A query row whose keys are all hidden (a length-0 sequence, or a keep tensor with an all-zero
// row) gets all-zero attention weights, a zero output and zero, finite gradients, on every
// path: the fused op, ScaledDotProductAttention, MultiHeadAttention (whose output row is zero
// even with a projection bias) and the transformer blocks (where the attention branch then
// adds nothing to the residual). PyTorch gives NaN there.
//
// AttentionBias is the other kind of mask: an additive float tensor (ALiBi, relative
// positions, learned biases) broadcast to (B, H, Tq, Tk) and added to the scaled scores before
// the softmax. It may be a Variable that trains. It must be finite: hide keys with an
// AttentionMask, not with -inf in a bias.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/autograd/variable.h"
#include "attograd/core/indices.h"

namespace ag {

class AttentionMask {
 public:
  AttentionMask() = default;  // sees every key

  static AttentionMask causal(int64_t T);
  // lengths: one per batch element, each in [0, Tk].
  static AttentionMask key_padding(const std::vector<int64_t>& lengths, int64_t Tk);
  static AttentionMask key_padding(const Indices& lengths, int64_t Tk);  // lengths: (B)
  // keep: 0/1 values only, rank <= 4; right-aligned against (B, H, Tq, Tk) like broadcasting.
  static AttentionMask keep(const Tensor& keep);

  // Seen only where both see; the shapes broadcast (std::invalid_argument naming both if not).
  friend AttentionMask operator&(const AttentionMask& a, const AttentionMask& b);
  AttentionMask& operator&=(const AttentionMask& other) { return *this = *this & other; }

  bool empty() const { return !keep_.defined(); }
  // (b, h, q, k), each either 1 or the full size; undefined when empty().
  const Tensor& keep_tensor() const { return keep_; }
  // How the mask was built, e.g. "causal(4) & key_padding(B=2, Tk=4)"; "none" when empty.
  const std::string& description() const { return description_; }

  // Throws std::invalid_argument, naming `op`, the mask and both shapes, unless the mask
  // broadcasts to (B, H, Tq, Tk).
  void check(const char* op, int64_t B, int64_t H, int64_t Tq, int64_t Tk) const;
  // 1 where query (b, q) sees at least one key in some head, else 0: shape (b, 1, q, 1), or
  // undefined when every query sees a key (the common case, checked once here).
  Tensor rows_with_keys() const;

 private:
  AttentionMask(Tensor keep, std::string description);
  Tensor keep_;  // f32, rank 4
  std::string description_ = "none";
};

class AttentionBias {
 public:
  AttentionBias() = default;  // no bias
  // bias: finite floats, rank <= 4, broadcastable to (B, H, Tq, Tk). A Variable that requires
  // grad receives the gradient of the scores.
  explicit AttentionBias(Variable bias);
  explicit AttentionBias(const Tensor& bias) : AttentionBias(Variable(bias)) {}

  bool empty() const { return !bias_.defined(); }
  const Variable& variable() const { return bias_; }
  // As `check` above for the bias's shape.
  void check(const char* op, int64_t B, int64_t H, int64_t Tq, int64_t Tk) const;

 private:
  Variable bias_;
};

}  // namespace ag
