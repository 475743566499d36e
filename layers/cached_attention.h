// Causal self-attention over a KvCache: the incremental-decoding twin of
// MultiHeadAttention::forward(x, AttentionMask::causal(T)) and of a TransformerBlock with that
// mask, for a decoder that feeds a few new positions at a time.
//
//   x: (B, T_new, d_model), the positions P .. P+T_new-1 where P = cache.length(layer)
//   -> (B, T_new, d_model), equal to rows P .. P+T_new-1 of the full causal forward over all
//      P+T_new positions (the tests hold them equal in f64 to 1e-10).
//
// Each call projects only the new positions, appends their keys and values (B, H, T_new, d) to
// the cache and lets each new query at position P+i attend to the cached keys 0 .. P+i. One
// new token thus costs its own projections plus attention over P+1 keys, instead of the whole
// forward pass over the context.
//
// Inference only: the cache holds plain tensors, so no gradient could reach earlier positions.
// Both functions throw std::logic_error when grad mode is on (wrap the decoding loop in a
// NoGradGuard) and std::invalid_argument, naming the shapes, when x, the layer or the cache do
// not fit the attention (batch, heads, head sizes, dtype, room left in the cache). Train and
// eval run the same code as the uncached forward: dropout follows the modules' mode.
#pragma once

#include <cstdint>

#include "attograd/layers/attention.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/transformer.h"

namespace ag {

// Self-attention of `attn` (query, key and value sizes all d_model) through layer `layer` of
// the cache.
Variable cached_self_attention(MultiHeadAttention& attn, const Variable& x, KvCache& cache, int64_t layer);

// A TransformerBlock (pre- or post-norm) on new positions, its attention causal through the
// cache: what block.forward(x_all, AttentionMask::causal(T)) gives for the new rows.
Variable cached_block_forward(TransformerBlock& block, const Variable& x, KvCache& cache, int64_t layer);

}  // namespace ag
