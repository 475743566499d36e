// Incremental decoding through a TransformerDecoderLayer: the decoder-side twin of
// cached_block_forward (cached_attention.h), for an encoder-decoder that feeds one target
// position at a time.
//
//   KvCache memory_kv(...max_len = S...);           // cross-attention keys and values
//   for (i = 0; i < n_layers; ++i) append_memory(layer(i).multihead_attn(), memory, memory_kv, i);  // once
//   KvCache self_kv(...max_len = T_max...);         // causal self-attention, grows by a step
//   y = cached_decoder_layer_forward(layer(i), x, self_kv, memory_kv, i, memory_mask);
//
//   x: (B, T_new, d_model), the target positions P .. P+T_new-1 where P = self_kv.length(i)
//   -> (B, T_new, d_model), equal to rows P .. P+T_new-1 of layer(i).forward(all P+T_new
//      positions, memory, causal(P+T_new), memory_mask)
//
// Self-attention goes through cached_self_attention (the GPT's KV cache, the same code).
// Cross-attention reads keys and values that append_memory projected from the memory once;
// each step then projects only its queries. memory_mask is the source's key padding,
// AttentionMask::key_padding(src_lengths, S), which broadcasts over any number of queries.
//
// Inference only, like cached_attention.h: std::logic_error with grad mode on,
// std::invalid_argument naming the shapes when the caches do not fit the layer.
#pragma once

#include <cstdint>

#include "attograd/layers/attention.h"
#include "attograd/layers/attention_mask.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/transformer_decoder.h"

namespace ag {

// Projects memory (B, S, k_dim) with attn's w_k and w_v and appends the (B, H, S, d_k) keys and
// (B, H, S, d_v) values to layer `layer` of `cache`.
void append_memory(MultiHeadAttention& attn, const Variable& memory, KvCache& cache, int64_t layer);

// attn's cross-attention of x (B, T_new, q_dim) over the keys and values held in layer `layer`
// of `memory_kv` -> (B, T_new, d_model).
Variable cached_cross_attention(MultiHeadAttention& attn, const Variable& x, const KvCache& memory_kv, int64_t layer,
                                const AttentionMask& memory_mask);

Variable cached_decoder_layer_forward(TransformerDecoderLayer& layer, const Variable& x, KvCache& self_kv,
                                      const KvCache& memory_kv, int64_t index, const AttentionMask& memory_mask);

}  // namespace ag
