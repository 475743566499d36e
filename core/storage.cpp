#include "attograd/core/storage.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/core/pages.h"

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

// Blocks from 256 KB up are whole pages mapped from the kernel (core/pages.h): giving one back
// lowers the RSS at once, and its pages can move to another block. (glibc's malloc would serve
// them from its heap once its adaptive mmap threshold has grown, and keep a freed middle.)
constexpr std::size_t kMapped = AG_CACHE_BLOCKS ? std::size_t{256} << 10 : SIZE_MAX;

std::size_t rounded(std::size_t bytes) {
  const std::size_t unit = bytes >= kMapped ? 4096 : Storage::kAlignment;
  return std::max(unit, (bytes + unit - 1) / unit * unit);
}

// A training step allocates the same sizes every step, so freed blocks are kept by size and
// handed out again: after the first steps nothing reaches the system, whose fresh pages fault
// on first touch (~0.8 ms per MB here; the small benchmark is 25% slower without the cache).
// The sizes in use change within a step, and an exact-size cache would hold every size's
// high-water mark at once (the large benchmark: 27 MB over its live peak). So a miss of a
// mapped size is made of the pages of cached mapped blocks, best fit first (pages::assemble).
// A miss that still goes to the system first gives back the least recently wanted sizes, until
// live + cached + the new block fit under the most bytes ever live at once plus 1/8 (4 MB
// at least).
class BlockCache {
 public:
  void* acquire(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    last_wanted_[bytes] = ++clock_;
    const auto exact = free_.find(bytes);
    void* p = exact != free_.end() ? take(exact) : nullptr;
    if (p == nullptr && bytes >= kMapped && cached_mapped_ >= bytes) {
      const auto donor = [this](std::size_t need) {  // the smallest mapped block >= need, else the largest
        auto it = free_.lower_bound(std::max(need, kMapped));
        if (it == free_.end()) --it;  // a mapped block, as cached_mapped_ >= need
        const std::size_t size = it->first;
        return std::pair{take(it), size};
      };
      p = pages::assemble(bytes, donor, [this](void* rest, std::size_t n) { keep(rest, n); }, kMapped);
    }
    if (p == nullptr) {
      const std::size_t limit = std::max(high_water_, live_ + bytes) + std::max<std::size_t>(4 << 20, high_water_ / 8);
      while (cached_ > 0 && live_ + bytes + cached_ > limit) {
        const auto oldest = std::ranges::min_element(free_, {}, [&](const auto& e) { return last_wanted_[e.first]; });
        const std::size_t size = oldest->first;
        give_back(take(oldest), size);
      }
      p = system_alloc(bytes);
      if (p == nullptr) {
        trim_locked();  // and try once more
        p = system_alloc(bytes);
      }
      if (p == nullptr) throw OutOfMemory("out of memory: the system refused " + format_bytes(static_cast<double>(bytes)));
    }
    live_ += bytes;
    high_water_ = std::max(high_water_, live_);
    peak_live_ = std::max(peak_live_, live_);
    peak_held_ = std::max(peak_held_, live_ + cached_);
    return p;
  }

  void release(void* p, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    live_ -= bytes;
    if (AG_CACHE_BLOCKS) keep(p, bytes);
    else give_back(p, bytes);
  }

  void trim() {
    std::lock_guard lock(mutex_);
    trim_locked();
  }

  MemoryStats stats() {
    std::lock_guard lock(mutex_);
    return {live_, cached_, peak_live_, peak_held_, high_water_};
  }

  void reset_peaks() {
    std::lock_guard lock(mutex_);
    peak_live_ = live_;
    peak_held_ = live_ + cached_;
  }

 private:
  using FreeLists = std::map<std::size_t, std::vector<void*>>;

  // The members below are called with mutex_ held.
  void keep(void* p, std::size_t bytes) {
    free_[bytes].push_back(p);
    cached_ += bytes;
    if (bytes >= kMapped) cached_mapped_ += bytes;
  }

  void* take(FreeLists::iterator it) {  // and drops an emptied list, so lower_bound finds blocks
    void* p = it->second.back();
    cached_ -= it->first;
    if (it->first >= kMapped) cached_mapped_ -= it->first;
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);
    return p;
  }

  void trim_locked() {
    while (!free_.empty()) {
      const std::size_t size = free_.begin()->first;
      give_back(take(free_.begin()), size);
    }
  }

  static void* system_alloc(std::size_t bytes) {
    return bytes < kMapped ? std::aligned_alloc(Storage::kAlignment, bytes) : pages::map(bytes);
  }

  static void give_back(void* p, std::size_t bytes) {
    if (bytes < kMapped) std::free(p);
    else pages::unmap(p, bytes);
  }

  std::mutex mutex_;
  FreeLists free_;                                         // cached blocks by size
  std::unordered_map<std::size_t, uint64_t> last_wanted_;  // clock_ at each size's last request
  uint64_t clock_ = 0;
  std::size_t live_ = 0, cached_ = 0, cached_mapped_ = 0, high_water_ = 0, peak_live_ = 0, peak_held_ = 0;
};

// Never destroyed: tensors held in static objects may be freed after main returns.
BlockCache& cache() {
  static BlockCache* c = new BlockCache();
  return *c;
}

}  // namespace

Storage::Storage(std::size_t bytes) : bytes_(bytes) { data_ = cache().acquire(rounded(bytes)); }

Storage::~Storage() { cache().release(data_, rounded(bytes_)); }

void release_cached_memory() { cache().trim(); }

MemoryStats memory_stats() { return cache().stats(); }

void reset_peak_memory_stats() { cache().reset_peaks(); }

}  // namespace ag
