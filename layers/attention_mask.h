// The two things that shape attention's scores besides q and k.
//
// AttentionMask (autograd/attention_mask.h, included here) says which keys each query may see,
// by name: causal (with an offset for cached keys), key_padding, an explicit-axes keep pattern,
// and their conjunctions with &. It lives beside the op that reads its structure.
//
// AttentionBias is the other kind of mask: an additive float tensor (ALiBi, relative
// positions, learned biases) broadcast to (B, H, Tq, Tk) and added to the scaled scores before
// the softmax. It may be a Variable that trains. It must be finite: hide keys with an
// AttentionMask, not with -inf in a bias.
#pragma once

#include <cstdint>

#include "attograd/autograd/attention_mask.h"
#include "attograd/autograd/variable.h"

namespace ag {

class AttentionBias {
 public:
  AttentionBias() = default;  // no bias
  // bias: finite floats, rank <= 4, broadcastable to (B, H, Tq, Tk). A Variable that requires
  // grad receives the gradient of the scores.
  explicit AttentionBias(Variable bias);
  explicit AttentionBias(const Tensor& bias) : AttentionBias(Variable(bias)) {}

  bool empty() const { return !bias_.defined(); }
  const Variable& variable() const { return bias_; }
  // Throws std::invalid_argument, naming `op` and both shapes, unless the bias broadcasts to
  // (B, H, Tq, Tk).
  void check(const char* op, int64_t B, int64_t H, int64_t Tq, int64_t Tk) const;

 private:
  Variable bias_;
};

}  // namespace ag
