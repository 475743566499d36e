#include "core/storage.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
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

// Blocks this large are mapped from the kernel directly and unmapped when the cache lets go
// of them, so that giving a block back lowers the RSS at once. Through malloc it would not:
// glibc raises its mmap threshold to the size of every mapped chunk it frees (up to 32 MB),
// after which blocks of that size come from the heap, whose freed middle is never returned.
// (Not under AddressSanitizer, which watches malloc'ed blocks only.)
constexpr std::size_t kMapThreshold = AG_CACHE_BLOCKS ? std::size_t{256} << 10 : SIZE_MAX;

void* system_alloc(std::size_t bytes) {
  if (bytes >= kMapThreshold) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;  // page-aligned, so kAlignment-aligned too
  }
  return std::aligned_alloc(Storage::kAlignment, bytes);
}

void system_free(void* p, std::size_t bytes) {
  if (bytes >= kMapThreshold) munmap(p, bytes);
  else std::free(p);
}

// Freed blocks are kept by exact (rounded) size and handed out again: a training step
// allocates the same sizes every step, so after the first step almost no allocation reaches
// the system (where large blocks are fresh pages that fault on first touch).
//
// An exact-size cache makes the process hold, for every size, the most blocks of that size
// ever alive at once, which can exceed the most bytes ever alive at once: in the large
// benchmark, after backward every activation block sits in the cache while the gradients, of
// other sizes, are allocated anew (27 MB over a live peak of 461 MB). Unbounded, a program
// whose shapes change (evaluation batches, other sequence lengths) would keep a set of blocks
// per shape. So a miss first gives back cached blocks, least recently wanted sizes first,
// until the blocks held (live + cached + the new one) fit under the most bytes ever live at
// once plus a slack of 1/8 of that. The slack is not smaller because a repeating training
// step must settle with no misses: a block given back is refaulted page by page on its next
// use (~0.8 ms per MB on this VM), and with a 1/64 slack the large step lost ~55 MB of pages
// per step (2% of its time) to save 20 MB.
class BlockCache {
 public:
  static constexpr std::size_t kMaxCachedBytes = std::size_t{2} << 30;

  void* acquire(std::size_t bytes) {
    std::vector<std::pair<void*, std::size_t>> doomed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      SizeClass& c = free_[bytes];
      c.last_wanted = ++clock_;
      if (!c.blocks.empty()) {
        void* p = c.blocks.back();
        c.blocks.pop_back();
        cached_bytes_ -= bytes;
        note_live(bytes);
        return p;
      }
      make_room(bytes, doomed);
    }
    for (const auto& [p, size] : doomed) system_free(p, size);
    void* p = system_alloc(bytes);
    if (p == nullptr) {
      trim();  // give cached blocks back and try once more before failing
      p = system_alloc(bytes);
      if (p == nullptr) throw std::bad_alloc();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    note_live(bytes);
    return p;
  }

  void release(void* p, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_bytes_ -= bytes;
      if (AG_CACHE_BLOCKS && cached_bytes_ + bytes <= kMaxCachedBytes) {
        free_[bytes].blocks.push_back(p);
        cached_bytes_ += bytes;
        return;
      }
    }
    system_free(p, bytes);
  }

  void trim() {
    std::vector<std::pair<void*, std::size_t>> doomed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [size, c] : free_) {
        for (void* p : c.blocks) doomed.emplace_back(p, size);
        c.blocks.clear();
      }
      cached_bytes_ = 0;
    }
    for (const auto& [p, size] : doomed) system_free(p, size);
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {live_bytes_, cached_bytes_, peak_live_, peak_held_, high_water_live_};
  }

  void reset_peaks() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_live_ = live_bytes_;
    peak_held_ = live_bytes_ + cached_bytes_;
  }

 private:
  struct SizeClass {
    std::vector<void*> blocks;
    uint64_t last_wanted = 0;  // clock_ at the last acquire of this size
  };

  // Called with mutex_ held, before a miss of `bytes` goes to the system: moves cached blocks
  // into `doomed` (freed by the caller outside the lock) until the blocks held fit.
  void make_room(std::size_t bytes, std::vector<std::pair<void*, std::size_t>>& doomed) {
    const std::size_t want_live = live_bytes_ + bytes;
    const std::size_t limit = std::max(high_water_live_, want_live) + slack();
    while (cached_bytes_ > 0 && want_live + cached_bytes_ > limit) {
      std::pair<const std::size_t, SizeClass>* oldest = nullptr;
      for (auto& entry : free_) {
        if (!entry.second.blocks.empty() && (oldest == nullptr || entry.second.last_wanted < oldest->second.last_wanted)) {
          oldest = &entry;
        }
      }
      doomed.emplace_back(oldest->second.blocks.back(), oldest->first);
      oldest->second.blocks.pop_back();
      cached_bytes_ -= oldest->first;
    }
  }

  std::size_t slack() const { return std::max(kMinSlack, high_water_live_ / kSlackDivisor); }

  // Called with mutex_ held.
  void note_live(std::size_t bytes) {
    live_bytes_ += bytes;
    high_water_live_ = std::max(high_water_live_, live_bytes_);
    peak_live_ = std::max(peak_live_, live_bytes_);
    peak_held_ = std::max(peak_held_, live_bytes_ + cached_bytes_);
  }

  static constexpr std::size_t kMinSlack = std::size_t{4} << 20;
  static constexpr std::size_t kSlackDivisor = 8;

  std::mutex mutex_;
  std::unordered_map<std::size_t, SizeClass> free_;
  uint64_t clock_ = 0;
  std::size_t cached_bytes_ = 0;
  std::size_t live_bytes_ = 0;
  std::size_t high_water_live_ = 0;     // never reset: the budget for blocks held
  std::size_t peak_live_ = 0, peak_held_ = 0;  // since reset_peaks()
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

MemoryStats memory_stats() { return cache().stats(); }

void reset_peak_memory_stats() { cache().reset_peaks(); }

}  // namespace ag
