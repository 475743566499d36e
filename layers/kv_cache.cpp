#include "attograd/layers/kv_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ag {

namespace {

KvCacheOptions resolved(KvCacheOptions o) {
  if (o.d_v == 0) o.d_v = o.d_k;
  if (o.n_layers <= 0 || o.batch <= 0 || o.n_head <= 0 || o.d_k <= 0 || o.d_v <= 0 || o.max_len <= 0) {
    throw std::invalid_argument("KvCache: n_layers, batch, n_head, d_k, d_v and max_len must be positive, got n_layers=" +
                                std::to_string(o.n_layers) + " batch=" + std::to_string(o.batch) +
                                " n_head=" + std::to_string(o.n_head) + " d_k=" + std::to_string(o.d_k) +
                                " d_v=" + std::to_string(o.d_v) + " max_len=" + std::to_string(o.max_len));
  }
  // Refuse absurd sizes before allocating anything (the whole cache, both buffers of every layer).
  Shape{o.n_layers, o.batch, o.n_head, o.max_len, o.d_k + o.d_v}.checked_numel("KvCache");
  return o;
}

std::string expected_shape(const KvCacheOptions& o, const char* t_new, int64_t d) {
  return "(B=" + std::to_string(o.batch) + ", H=" + std::to_string(o.n_head) + ", " + t_new + ", " +
         std::to_string(d) + ")";
}

}  // namespace

KvCache::KvCache(const KvCacheOptions& options) : options_(resolved(options)) {
  const KvCacheOptions& o = options_;
  layers_.resize(static_cast<size_t>(o.n_layers));
  for (Layer& l : layers_) {
    // Zeros rather than uninitialised memory: the unused tail is never read, but a view that
    // outlives a reset() should show numbers, not garbage.
    l.keys = zeros({o.batch, o.n_head, o.max_len, o.d_k}, o.dtype);
    l.values = zeros({o.batch, o.n_head, o.max_len, o.d_v}, o.dtype);
  }
}

const KvCache::Layer& KvCache::layer_at(int64_t layer, const char* op) const {
  if (layer < 0 || layer >= options_.n_layers) {
    throw std::invalid_argument(std::string("KvCache::") + op + ": layer " + std::to_string(layer) +
                                " is outside [0, n_layers=" + std::to_string(options_.n_layers) + ")");
  }
  return layers_[static_cast<size_t>(layer)];
}

void KvCache::append(int64_t layer, const Tensor& k, const Tensor& v) {
  const KvCacheOptions& o = options_;
  layer_at(layer, "append");
  Layer& l = layers_[static_cast<size_t>(layer)];
  const bool shapes = k.defined() && v.defined() && k.dim() == 4 && v.dim() == 4 && k.shape()[0] == o.batch &&
                      k.shape()[1] == o.n_head && k.shape()[3] == o.d_k && v.shape()[0] == o.batch &&
                      v.shape()[1] == o.n_head && v.shape()[3] == o.d_v && k.shape()[2] == v.shape()[2] &&
                      k.shape()[2] >= 1;
  if (!shapes) {
    throw std::invalid_argument("KvCache::append: layer " + std::to_string(layer) + " expects k " +
                                expected_shape(o, "T_new", o.d_k) + " and v " + expected_shape(o, "T_new", o.d_v) +
                                " with the same T_new >= 1, got k=" +
                                (k.defined() ? k.shape().str() : std::string("(undefined)")) +
                                " v=" + (v.defined() ? v.shape().str() : std::string("(undefined)")));
  }
  if (k.dtype() != o.dtype || v.dtype() != o.dtype) {
    throw std::invalid_argument(std::string("KvCache::append: the cache holds ") + dtype_name(o.dtype) + ", got k " +
                                dtype_name(k.dtype()) + " and v " + dtype_name(v.dtype()));
  }
  const int64_t t_new = k.shape()[2];
  if (l.length + t_new > o.max_len) {
    throw std::invalid_argument("KvCache::append: layer " + std::to_string(layer) + " holds " +
                                std::to_string(l.length) + " of max_len=" + std::to_string(o.max_len) +
                                " positions and cannot take " + std::to_string(t_new) + " more (k=" +
                                k.shape().str() + "); reset() it or build a longer cache");
  }
  l.keys.narrow(2, l.length, t_new).copy_(k);
  l.values.narrow(2, l.length, t_new).copy_(v);
  l.length += t_new;
}

Tensor KvCache::keys(int64_t layer) const {
  const Layer& l = layer_at(layer, "keys");
  return l.keys.narrow(2, 0, l.length);
}

Tensor KvCache::values(int64_t layer) const {
  const Layer& l = layer_at(layer, "values");
  return l.values.narrow(2, 0, l.length);
}

int64_t KvCache::length(int64_t layer) const { return layer_at(layer, "length").length; }

int64_t KvCache::length() const {
  const int64_t first = layers_.front().length;
  for (size_t i = 1; i < layers_.size(); ++i) {
    if (layers_[i].length != first) {
      throw std::logic_error("KvCache::length: layers hold different lengths (layer 0: " + std::to_string(first) +
                             ", layer " + std::to_string(i) + ": " + std::to_string(layers_[i].length) +
                             "); a decoding step was interrupted: reset() the cache");
    }
  }
  return first;
}

int64_t KvCache::remaining() const {
  int64_t longest = 0;
  for (const Layer& l : layers_) longest = std::max(longest, l.length);
  return options_.max_len - longest;
}

void KvCache::reset() {
  for (Layer& l : layers_) l.length = 0;
}

AttentionMask KvCache::causal_mask(int64_t layer, int64_t t_new) const {
  const int64_t past = layer_at(layer, "causal_mask").length;
  if (t_new < 1 || past + t_new > options_.max_len) {
    throw std::invalid_argument("KvCache::causal_mask: layer " + std::to_string(layer) + " holds " +
                                std::to_string(past) + " of max_len=" + std::to_string(options_.max_len) +
                                " positions; t_new=" + std::to_string(t_new) + " must be >= 1 and fit");
  }
  if (t_new == 1) return AttentionMask();  // the one new query sees every key
  return AttentionMask::causal(t_new, past);  // query i sees keys 0 .. past + i
}

}  // namespace ag
