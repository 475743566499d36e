#include "attograd/core/storage.h"

#include "attograd/core/format.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // mremap
#endif
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
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
constexpr std::size_t kPage = 4096;
// A block assembled from cached mappings is one address range of several kernel mappings
// (VMAs); beyond this many it is mapped afresh instead (the kernel allows ~65k per process).
constexpr std::size_t kMaxPieces = 16;

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
// An exact-size cache alone makes the process hold, for every size, the most blocks of that
// size ever alive at once, which can exceed the most bytes ever alive at once: in the large
// benchmark, once a step has consumed its activations their blocks sit in the cache while the
// blocks of its second half, of other sizes, are allocated anew (27 MB over a live peak of
// 461 MB). Two things bound it:
//   * a miss of a mapped size (>= kMapThreshold) is built from the pages of cached mapped
//     blocks of other sizes, moved with mremap (see assemble()): no new pages, no faults;
//   * otherwise a miss first gives back cached blocks, least recently wanted sizes first,
//     until the blocks held (live + cached + the new one) fit under the most bytes ever live
//     at once plus a slack of 1/8 of that. The slack is not smaller because a repeating step
//     must settle with no misses: a block given back is refaulted page by page on its next use
//     (~0.8 ms per MB on this VM); with a 1/64 slack (and no page moving) the large step lost
//     ~55 MB of pages per step, 2% of its time, to save 20 MB.
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
        if (bytes >= kMapThreshold) cached_mapped_bytes_ -= bytes;
        note_live(bytes);
        return p;
      }
      if (void* p = assemble(bytes)) {
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
      if (p == nullptr) throw OutOfMemory("out of memory: the system refused " + format_bytes(static_cast<double>(bytes)));
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
        cache_block(p, bytes);
        return;
      }
      pieces_.erase(p);
    }
    system_free(p, bytes);
  }

  void trim() {
    std::vector<std::pair<void*, std::size_t>> doomed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [size, c] : free_) {
        for (void* p : c.blocks) {
          doomed.emplace_back(p, size);
          pieces_.erase(p);
        }
        c.blocks.clear();
      }
      cached_bytes_ = 0;
      cached_mapped_bytes_ = 0;
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
      void* p = oldest->second.blocks.back();
      oldest->second.blocks.pop_back();
      doomed.emplace_back(p, oldest->first);
      pieces_.erase(p);
      cached_bytes_ -= oldest->first;
      if (oldest->first >= kMapThreshold) cached_mapped_bytes_ -= oldest->first;
    }
  }

  // Called with mutex_ held.
  void cache_block(void* p, std::size_t bytes) {
    free_[bytes].blocks.push_back(p);
    cached_bytes_ += bytes;
    if (bytes >= kMapThreshold) cached_mapped_bytes_ += bytes;
  }

  // The lengths of the kernel mappings block p consists of, in address order.
  std::vector<std::size_t> take_pieces(void* p, std::size_t bytes) {
    const auto it = pieces_.find(p);
    if (it == pieces_.end()) return {bytes};
    std::vector<std::size_t> v = std::move(it->second);
    pieces_.erase(it);
    return v;
  }

  // Called with mutex_ held, on a miss of a mapped size: builds the block from the pages of
  // cached mapped blocks of other sizes, moved (not copied) into one new address range with
  // mremap. The pages are already resident, so neither the RSS nor the page faults grow, and
  // the blocks held stay at the most bytes live at once even when the sizes in use change
  // (late in a step new blocks take the pages the activations left). Null when the cache
  // has too few mapped bytes or the block would need too many pieces.
  void* assemble(std::size_t bytes) {
    if (bytes < kMapThreshold || cached_mapped_bytes_ < bytes) return nullptr;
    void* dst = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (dst == MAP_FAILED) return nullptr;
    char* const base = static_cast<char*>(dst);
    std::vector<std::size_t> made;
    std::size_t filled = 0;
    while (filled < bytes) {
      // Best fit: the smallest cached block that completes the range (one move), else the
      // largest (fewest pieces).
      const std::size_t need = bytes - filled;
      std::pair<const std::size_t, SizeClass>* src_class = nullptr;
      for (auto& entry : free_) {
        if (entry.first < kMapThreshold || entry.second.blocks.empty()) continue;
        const bool fits = entry.first >= need;
        if (src_class == nullptr) src_class = &entry;
        else if (fits && (src_class->first < need || entry.first < src_class->first)) src_class = &entry;
        else if (!fits && src_class->first < need && entry.first > src_class->first) src_class = &entry;
      }
      const std::size_t src_size = src_class->first;
      char* src = static_cast<char*>(src_class->second.blocks.back());
      src_class->second.blocks.pop_back();
      cached_bytes_ -= src_size;
      cached_mapped_bytes_ -= src_size;
      std::vector<std::size_t> parts = take_pieces(src, src_size);
      std::size_t i = 0;
      bool failed = made.size() + parts.size() > kMaxPieces;
      while (!failed && i < parts.size() && filled < bytes) {
        const std::size_t take = std::min(parts[i], bytes - filled);
        failed = mremap(src, take, take, MREMAP_MAYMOVE | MREMAP_FIXED, base + filled) == MAP_FAILED;
        if (failed) break;
        made.push_back(take);
        filled += take;
        src += take;
        if (take < parts[i]) parts[i] -= take;  // the rest of this mapping stays where it was
        else ++i;
      }
      // What is left of the source is a cached block of its own (or given back when small).
      std::size_t rest = 0;
      for (std::size_t j = i; j < parts.size(); ++j) rest += parts[j];
      if (rest >= kMapThreshold && !failed) {
        if (parts.size() - i > 1) pieces_[src] = std::vector<std::size_t>(parts.begin() + static_cast<std::ptrdiff_t>(i), parts.end());
        cache_block(src, rest);
      } else if (rest > 0) {
        munmap(src, rest);  // too small to be a mapped block, or left over from a failed move
      }
      if (failed) {
        munmap(dst, bytes);  // with whatever was moved into it
        return nullptr;
      }
    }
    if (made.size() > 1) pieces_[dst] = std::move(made);
    return dst;
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
  std::size_t cached_mapped_bytes_ = 0;  // the part of cached_bytes_ in blocks >= kMapThreshold
  // Mapped blocks (live or cached) made of several kernel mappings: mremap moves pages within
  // one mapping only, so these are moved piece by piece.
  std::unordered_map<void*, std::vector<std::size_t>> pieces_;
  std::size_t live_bytes_ = 0;
  std::size_t high_water_live_ = 0;     // never reset: the budget for blocks held
  std::size_t peak_live_ = 0, peak_held_ = 0;  // since reset_peaks()
};

// Never destroyed: tensors held in static objects may be freed after main returns.
BlockCache& cache() {
  static BlockCache* c = new BlockCache();
  return *c;
}

// Mapped blocks are whole pages, so that their pages can be moved between blocks.
std::size_t rounded_size(std::size_t bytes) {
  const std::size_t unit = bytes >= kMapThreshold ? kPage : Storage::kAlignment;
  const std::size_t r = ((bytes + unit - 1) / unit) * unit;
  return r == 0 ? unit : r;
}

}  // namespace

Storage::Storage(std::size_t bytes) : bytes_(bytes) { data_ = cache().acquire(rounded_size(bytes)); }

Storage::~Storage() { cache().release(data_, rounded_size(bytes_)); }

void release_cached_memory() { cache().trim(); }

MemoryStats memory_stats() { return cache().stats(); }

void reset_peak_memory_stats() { cache().reset_peaks(); }

}  // namespace ag
