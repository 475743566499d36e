// Attention masks with names instead of polarity conventions, kept as what they mean down to
// the kernel.
//
// An AttentionMask says which keys each query may see. It is built from what it means, never
// from a raw tensor whose 0s and 1s might mean either thing, and it stays that structure:
//   AttentionMask::causal(T)                  query q sees keys 0..q               (Tq, Tk) = (T, T)
//   AttentionMask::causal(T, offset)          query q sees keys 0..q + offset      (T, T + offset)
//                                             (offset = keys already cached before the T queries)
//   AttentionMask::key_padding(lengths, Tk)   batch b sees keys 0..lengths[b] - 1  (B, 1, 1, Tk)
//   AttentionMask::keep(t)                    an arbitrary 0/1 pattern, 1 = seen, with explicit axes:
//                                             t is (Tq, Tk) shared by all, or (B, H, Tq, Tk) with
//                                             size 1 where it is shared
//   AttentionMask::keep_per_batch(t)          t: (B, Tq, Tk), one pattern per batch element
//   AttentionMask::keep_per_head(t)           t: (H, Tq, Tk), one pattern per head
//   a & b                                     seen only where both masks see it
// A default-constructed mask sees everything. A rank-3 tensor given to keep() is refused: it
// could be (B, Tq, Tk) or (H, Tq, Tk), and reading one as the other would be silently wrong.
//
// The attention kernel never sees a dense causal or padding tensor: it asks reach_of() for
// each query row's visible prefix (causal and key_padding are prefixes of the keys, so that is
// all they say) and reads the keep pattern only where one was given. keep_tensor() builds the
// dense 0/1 equivalent for the composed twin and for tests.
//
// A query row whose keys are all hidden (a length-0 sequence, or a keep pattern with an
// all-zero row) gets all-zero attention weights, a zero output and zero, finite gradients, on
// every path: the fused op, ScaledDotProductAttention, MultiHeadAttention (whose output row is
// zero even with a projection bias) and the transformer blocks (where the attention branch then
// adds nothing to the residual). PyTorch gives NaN there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/core/tensor.h"

namespace ag {

class AttentionMask {
 public:
  AttentionMask() = default;  // sees every key

  // T queries after `offset` earlier keys: Tq = T, Tk = T + offset; offset >= 0.
  static AttentionMask causal(int64_t T, int64_t offset = 0);
  // lengths: one per batch element, each in [0, Tk].
  static AttentionMask key_padding(const std::vector<int64_t>& lengths, int64_t Tk);
  static AttentionMask key_padding(const Indices& lengths, int64_t Tk);  // lengths: (B)
  // keep: 0/1 values only, of shape (Tq, Tk) or (B, H, Tq, Tk) (size 1 on shared axes).
  static AttentionMask keep(const Tensor& keep);
  static AttentionMask keep_per_batch(const Tensor& keep);  // (B, Tq, Tk)
  static AttentionMask keep_per_head(const Tensor& keep);   // (H, Tq, Tk)

  // Seen only where both see; the shapes broadcast (std::invalid_argument naming both if not).
  friend AttentionMask operator&(const AttentionMask& a, const AttentionMask& b);
  AttentionMask& operator&=(const AttentionMask& other) { return *this = *this & other; }

  bool empty() const { return shape_.rank() == 0; }
  // (B, H, Tq, Tk), each either 1 (shared) or the full size; the empty shape when empty().
  const Shape& shape() const { return shape_; }
  // How the mask was built, e.g. "causal(4) & key_padding(B=2, Tk=4)"; "none" when empty.
  const std::string& description() const { return description_; }

  // Throws std::invalid_argument, naming `op`, the mask and both shapes, unless the mask
  // broadcasts to (B, H, Tq, Tk).
  void check(const char* op, int64_t B, int64_t H, int64_t Tq, int64_t Tk) const;

  // ---- the structure, as the kernel reads it ----
  // A causal part that hides keys (causal(1, offset) hides none and leaves only its shape).
  bool is_causal() const { return causal_; }
  int64_t causal_offset() const { return offset_; }
  const std::vector<int64_t>& key_lengths() const { return lengths_; }  // empty, or (B | 1)
  // The arbitrary part: f32 0/1, contiguous, rank 4 with size 1 on shared axes; undefined
  // unless keep(), keep_per_batch() or keep_per_head() went into the mask.
  const Tensor& keep_pattern() const { return keep_; }
  // True when every (batch, head) slice has the same rows (no lengths, a pattern shared by all).
  bool same_for_every_slice() const;
  // reach[q] for q < Tq: one past the last key query q of slice (b, h) may see among Tk keys
  // (0: none). Below it only the keep pattern, if any, hides keys; from it on every key is
  // hidden. The mask must have passed check() against Tq and Tk.
  void reach_of(int64_t b, int64_t h, int64_t Tq, int64_t Tk, std::vector<int64_t>& reach) const;

  // The dense 0/1 equivalent, f32 of shape(); undefined when empty(). For the composed twin
  // and tests: the kernel does not use it.
  Tensor keep_tensor() const;
  // 1 where query (b, q) sees at least one key in some head, else 0: shape (b, 1, q, 1), or
  // undefined when every query sees a key (the common case: no pattern and no zero length).
  Tensor rows_with_keys() const;

 private:
  bool causal_ = false;
  int64_t offset_ = 0;
  std::vector<int64_t> lengths_;
  Tensor keep_;
  Shape shape_;
  std::string description_ = "none";
};

}  // namespace ag
