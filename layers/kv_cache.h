// KvCache: the keys and values of the positions a decoder has already seen, per layer, so that
// one new token costs attention over the cached positions (O(T)) instead of a forward pass over
// the whole context (O(T^2) attention and T times every projection).
//
//   KvCache cache(KvCacheOptions{.n_layers = 4, .batch = 1, .n_head = 4, .d_k = 32, .max_len = 128});
//   cache.append(layer, k, v);        // k: (B, H, T_new, d_k), v: (B, H, T_new, d_v)
//   Tensor keys = cache.keys(layer);  // (B, H, length(layer), d_k): every key so far, a view
//   cache.reset();                    // length 0 again, storage kept for the next sequence
//
// Layout: each layer owns one (B, H, max_len, d) buffer for keys and one for values, allocated
// once at construction; append copies the new positions into it and keys()/values() are views
// of its first length(layer) positions (strided over the unused tail, which attention reads in
// place). Nothing is reallocated while decoding.
//
// Any decoder can use it: a self-attention layer appends one step's keys and values and attends
// over all of them (cached_self_attention in layers/cached_attention.h); a cross-attention layer
// can append the encoder's projected keys and values once and only read them afterwards.
// Layers advance independently (a model appends to layer 0, then layer 1, ...); length() is the
// common length once every layer has taken the same step.
//
// The cache holds plain tensors, outside any autograd graph: gradients never flow into cached
// positions, which is why the cached attention refuses to run with grad mode on. The views
// alias the cache's storage: after reset(), the next append overwrites what earlier views show.
// Bad shapes, dtypes, layers or an append past max_len throw std::invalid_argument naming the
// call and every shape involved.
#pragma once

#include <cstdint>
#include <vector>

#include "attograd/core/tensor.h"

namespace ag {

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

  KvCacheOptions options_;
  std::vector<Layer> layers_;
};

}  // namespace ag
