#include "core/storage.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

// Under AddressSanitizer freed blocks go straight back to the allocator, so that a read of a
// freed tensor is reported instead of landing in a cached block.
#if defined(__SANITIZE_ADDRESS__)
#define AG_CACHE_BLOCKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AG_CACHE_BLOCKS 0
#endif
#endif
#ifndef AG_CACHE_BLOCKS
#define AG_CACHE_BLOCKS 1
#endif

namespace ag {

namespace {

// Freed blocks are kept by exact (rounded) size and handed out again: a training step
// allocates the same sizes every step, so after the first step almost no allocation reaches
// malloc (whose large blocks are fresh mmaps that page-fault on first touch).
class BlockCache {
 public:
  static constexpr std::size_t kMaxCachedBytes = std::size_t{2} << 30;

  void* acquire(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= bytes;
        return p;
      }
    }
    void* p = std::aligned_alloc(Storage::kAlignment, bytes);
    if (p == nullptr) {
      trim();  // give cached blocks back and try once more before failing
      p = std::aligned_alloc(Storage::kAlignment, bytes);
      if (p == nullptr) throw std::bad_alloc();
    }
    return p;
  }

  void release(void* p, std::size_t bytes) {
    if (!AG_CACHE_BLOCKS) {
      std::free(p);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_bytes_ + bytes <= kMaxCachedBytes) {
        free_[bytes].push_back(p);
        cached_bytes_ += bytes;
        return;
      }
    }
    std::free(p);
  }

  void trim() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) std::free(p);
      blocks.clear();
    }
    cached_bytes_ = 0;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_bytes_ = 0;
};

// Never destroyed: tensors held in static objects may be freed after main returns.
BlockCache& cache() {
  static BlockCache* c = new BlockCache();
  return *c;
}

std::size_t rounded_size(std::size_t bytes) {
  const std::size_t r = ((bytes + Storage::kAlignment - 1) / Storage::kAlignment) * Storage::kAlignment;
  return r == 0 ? Storage::kAlignment : r;
}

}  // namespace

Storage::Storage(std::size_t bytes) : bytes_(bytes) { data_ = cache().acquire(rounded_size(bytes)); }

Storage::~Storage() { cache().release(data_, rounded_size(bytes_)); }

void release_cached_memory() { cache().trim(); }

}  // namespace ag
