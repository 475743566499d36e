// What the encoder block (transformer.cpp) and the decoder layer (transformer_decoder.cpp)
// share, so that neither copies the other: the attention options read from the block options,
// the feed-forward and norm slots (the user's factory or the default layer), and one residual
// sublayer with its norm and dropout. Internal to layers/, not installed.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "attograd/autograd/ops.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/sublayer.h"
#include "attograd/layers/transformer.h"

namespace ag::transformer_detail {

// The attention of a block: sizes, bias, dropout on the weights and scale from `o`; the inputs
// are d_model wide (cross-attention sets k_dim / v_dim afterwards).
MultiHeadAttentionOptions attention_options(const TransformerBlockOptions& o);

// The feed-forward slot of `owner`: o.make_ff's layer, or PositionwiseFeedForward(d_model,
// d_ff, activation, dropout, ff_bias). std::invalid_argument naming owner and slot when the
// factory returns null.
std::unique_ptr<Sublayer> feed_forward_slot(const TransformerBlockOptions& o, const std::string& owner);
// A norm slot ("norm1", "norm", ...) of `owner`: o.make_norm's layer, or LayerNorm(d_model,
// layer_norm_eps). Each call builds a layer with parameters of its own.
std::unique_ptr<Sublayer> norm_slot(const TransformerBlockOptions& o, const std::string& owner, const char* slot);

// One residual sublayer around `branch` (a callable Variable -> Variable of the same shape):
//   pre-norm  (norm_first):  x + dropout(branch(norm(x)))
//   post-norm:               norm(x + dropout(branch(x)))
// The norm's output shape is checked on behalf of `owner`'s slot `norm_name`.
template <class Branch>
Variable residual(bool norm_first, const Variable& x, Sublayer& norm, Dropout& dropout, const Module& owner,
                  const char* norm_name, Branch&& branch) {
  if (norm_first) return x + dropout(std::forward<Branch>(branch)(apply_sublayer(norm, x, owner, norm_name)));
  return apply_sublayer(norm, x + dropout(std::forward<Branch>(branch)(x)), owner, norm_name);
}

}  // namespace ag::transformer_detail
