// KvCache: the keys and values of the positions a decoder has already seen, per layer, so that
// one new token costs attention over the cached positions (O(T)) instead of a forward pass over
// the whole context (O(T^2) attention and T times every projection).
//
// The cache is an optional argument of the modules' own forwards, as in llama2.c's
// forward(token, pos): there is no second, cached copy of attention or of the blocks.
//
//   KvCache cache(KvCacheOptions{.n_layers = 4, .batch = 1, .n_head = 4, .d_k = 32, .max_len = 128});
//   NoGradGuard no_grad;                               // cached keys and values are outside any graph
//   // x_new: (B, T_new, d_model), the positions P .. P+T_new-1 after the P = cache.length(i) cached
//   const AttentionMask mask = cache.causal_mask(i, T_new);  // taken before the step appends
//   y = block.forward(x_new, mask, {}, cache.layer(i));     // block i: those rows of the full forward
//   Tensor keys = cache.keys(i);                       // (B, H, length(i), d_k): every key so far, a view
//   cache.reset();                                     // length 0 again, storage kept for the next sequence
//
// How an attention uses its layer of the cache (MultiHeadAttention::forward, attention.h):
//   cache.layer(i)         self-attention: each call projects only the new positions, appends their
//                          keys and values and attends over every position cached so far; the mask
//                          covers (T_new, P + T_new) keys, causal_mask() gives the causal one
//   cache.memory_layer(i)  cross-attention over a fixed sequence (an encoder's output): the first
//                          call projects and stores its keys and values, later calls project only
//                          their queries and read them
// Layers advance independently (a model appends to layer 0, then layer 1, ...); length() is the
// common length once every layer has taken the same step.
//
// Layout: each layer owns one (B, H, max_len, d) buffer for keys and one for values, allocated
// once at construction; append copies the new positions into it and keys()/values() are views
// of its first length(layer) positions (strided over the unused tail, which attention reads in
// place). Nothing is reallocated while decoding.
//
// The cache holds plain tensors, outside any autograd graph: gradients never flow into cached
// positions, which is why an attention given a cache refuses to run with grad mode on. The views
// alias the cache's storage: after reset(), the next append overwrites what earlier views show.
// Bad shapes, dtypes, layers or an append past max_len throw std::invalid_argument naming the
// call and every shape involved.
#pragma once

#include <cstdint>
#include <vector>

#include "attograd/core/tensor.h"
#include "attograd/layers/attention_mask.h"

namespace ag {

class KvCache;

// How an attention uses its layer of a cache (see the opening comment).
enum class KvCacheUse {
  append,  // self-attention: every call appends its new positions, attends over all of them
  memory,  // cross-attention: the first call stores the projected memory, later calls read it
};

// One layer of a KvCache as an attention's forward takes it; a default one means no cache.
// Made by KvCache::layer / KvCache::memory_layer.
struct KvCacheLayer {
  KvCache* cache = nullptr;
  int64_t index = 0;
  KvCacheUse use = KvCacheUse::append;
  bool empty() const { return cache == nullptr; }
};

struct KvCacheOptions {
  int64_t n_layers = 0;
  int64_t batch = 0;
  int64_t n_head = 0;
  int64_t d_k = 0;      // per head, keys (and queries)
  int64_t d_v = 0;      // per head, values; 0 means d_k
  int64_t max_len = 0;  // positions a layer can hold
  DType dtype = DType::f32;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheOptions& options);
  // Movable, not copyable: a copy would share the buffers, and two decoders would overwrite
  // each other's positions.
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Appends T_new >= 1 positions to layer `layer`: k (B, H, T_new, d_k), v (B, H, T_new, d_v),
  // in the cache's dtype, any strides. They take positions length(layer) .. length(layer)+T_new-1.
  void append(int64_t layer, const Tensor& k, const Tensor& v);
  // Every cached key / value of a layer: (B, H, length(layer), d_k) / (..., d_v), views without copy.
  Tensor keys(int64_t layer) const;
  Tensor values(int64_t layer) const;

  int64_t length(int64_t layer) const;
  // The common length of all layers; std::logic_error when they differ (a step was interrupted).
  int64_t length() const;
  // Positions still free in every layer: max_len - the longest layer.
  int64_t remaining() const;
  // Every layer back to length 0 (storage kept).
  void reset();

  // Layer `layer` for an attention's forward, self-attention or cross-attention use;
  // std::invalid_argument when the layer is outside [0, n_layers).
  KvCacheLayer layer(int64_t layer) { return {this, checked_layer(layer, "layer"), KvCacheUse::append}; }
  KvCacheLayer memory_layer(int64_t layer) { return {this, checked_layer(layer, "memory_layer"), KvCacheUse::memory}; }
  // The causal mask of t_new >= 1 queries about to be appended to `layer` after its P =
  // length(layer) positions: query i sits at position P + i and sees keys 0 .. P + i, a keep
  // mask (1, 1, t_new, P + t_new). Empty for t_new = 1: one new query sees every key. Take it
  // before the step appends.
  AttentionMask causal_mask(int64_t layer, int64_t t_new) const;

  // Options with d_v resolved.
  const KvCacheOptions& options() const { return options_; }
  int64_t n_layers() const { return options_.n_layers; }
  int64_t max_len() const { return options_.max_len; }

 private:
  struct Layer {
    Tensor keys;    // (B, H, max_len, d_k)
    Tensor values;  // (B, H, max_len, d_v)
    int64_t length = 0;
  };
  const Layer& layer_at(int64_t layer, const char* op) const;
  int64_t checked_layer(int64_t layer, const char* op) const {
    layer_at(layer, op);
    return layer;
  }

  KvCacheOptions options_;
  std::vector<Layer> layers_;
};

}  // namespace ag
