// MultiHeadAttention with a KvCache (attention.h, kv_cache.h): the two steps of its forward that
// differ when a cache is given, where the keys and values come from. Everything else, the query
// projection, the attention, the heads' merge and the zero rows, is the forward's own code.
#include <stdexcept>
#include <string>

#include "attograd/autograd/grad_mode.h"
#include "attograd/layers/attention.h"

namespace ag {

int64_t MultiHeadAttention::cached_key_count(const KvCacheLayer& cache, const Variable& query,
                                             const Variable& key) const {
  const char* use = cache.use == KvCacheUse::append ? "cache.layer(" : "cache.memory_layer(";
  if (grad_enabled()) {
    throw std::logic_error("MultiHeadAttention: decoding through a KvCache (" + std::string(use) +
                           std::to_string(cache.index) + ")) builds no graph: cached keys and values are plain "
                           "tensors that no gradient could reach; run it under a NoGradGuard");
  }
  const MultiHeadAttentionOptions& o = options_;
  const KvCacheOptions& c = cache.cache->options();
  const int64_t B = query.shape()[0], t_new = key.shape()[1];
  if (c.batch != B || c.n_head != o.n_head || c.d_k != o.d_k || c.d_v != o.d_v || c.dtype != query.dtype()) {
    throw std::invalid_argument(
        "MultiHeadAttention: the cache holds (B=" + std::to_string(c.batch) + ", H=" + std::to_string(c.n_head) +
        ", T, d_k=" + std::to_string(c.d_k) + " / d_v=" + std::to_string(c.d_v) + ") in " + dtype_name(c.dtype) +
        " but query " + query.shape().str() + " (" + dtype_name(query.dtype()) + ") goes through attention with H=" +
        std::to_string(o.n_head) + " d_k=" + std::to_string(o.d_k) + " d_v=" + std::to_string(o.d_v));
  }
  const int64_t past = cache.cache->length(cache.index);  // refuses a layer outside the cache
  switch (cache.use) {
    case KvCacheUse::append:
      if (past + t_new > c.max_len) {
        throw std::invalid_argument("MultiHeadAttention: layer " + std::to_string(cache.index) + " of the cache holds " +
                                    std::to_string(past) + " positions; " + std::to_string(t_new) + " more (key=" +
                                    key.shape().str() + ") exceed max_len=" + std::to_string(c.max_len));
      }
      return past + t_new;
    case KvCacheUse::memory:
      if (past != 0 && past != t_new) {
        throw std::invalid_argument("MultiHeadAttention: memory layer " + std::to_string(cache.index) +
                                    " of the cache holds " + std::to_string(past) + " positions but key=" +
                                    key.shape().str() + " has " + std::to_string(t_new) +
                                    "; reset() the cache for another memory");
      }
      if (t_new > c.max_len) {
        throw std::invalid_argument("MultiHeadAttention: memory key=" + key.shape().str() + " has " +
                                    std::to_string(t_new) + " positions, more than the cache's max_len=" +
                                    std::to_string(c.max_len));
      }
      return t_new;
  }
  return t_new;
}

std::pair<Variable, Variable> MultiHeadAttention::cached_keys_values(const KvCacheLayer& cache, const Variable& key,
                                                                     const Variable& value) {
  KvCache& kv = *cache.cache;
  // A memory layer is projected once, by the first call; a self-attention layer takes every
  // call's new positions.
  if (cache.use == KvCacheUse::append || kv.length(cache.index) == 0) {
    const Variable k = split_heads(w_k_->forward(key), options_.d_k);    // (B, H, T_new, d_k)
    const Variable v = split_heads(w_v_->forward(value), options_.d_v);  // (B, H, T_new, d_v)
    kv.append(cache.index, k.value(), v.value());
  }
  // (B, H, Tk, d): every cached position, views of the cache's buffers.
  return {Variable(kv.keys(cache.index)), Variable(kv.values(cache.index))};
}

}  // namespace ag
