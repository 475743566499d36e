// Storage: one 64-byte aligned block of memory shared by every tensor that views it.
// A Tensor holds a std::shared_ptr<Storage>; views (transpose, slice, expand ...) share it.
// Freed blocks go to a process-wide cache keyed by size and are reused by the next allocation
// of that size (release_cached_memory() hands them back to the system). The cache is bounded:
// see MemoryStats::high_water_live.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <string>

#include "attograd/core/format.h"

namespace ag {

// The system refused memory. It is a std::bad_alloc (so code that handles allocation failure
// still does) whose what() says how many bytes were asked for and, once Tensor has added it,
// for what shape and dtype.
class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

class Storage {
 public:
  static constexpr std::size_t kAlignment = 64;

  // Uninitialised memory of `bytes` bytes (the caller fills it). OutOfMemory when the system
  // has none to give.
  explicit Storage(std::size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Returns every cached free block to the system.
void release_cached_memory();

// Bytes held by Storage blocks (rounded to the alignment): `live` in tensors, `cached` freed
// and kept for reuse; the peaks since the start or the last reset_peak_memory_stats().
// `peak_held` is the most live + cached at once: what the blocks add to the process's RSS.
// `high_water_live` is the most bytes ever live at once (never reset): the cache gives blocks
// back rather than hold more than high_water_live + max(4 MB, high_water_live / 8).
struct MemoryStats {
  std::size_t live = 0, cached = 0, peak_live = 0, peak_held = 0, high_water_live = 0;
};
MemoryStats memory_stats();
void reset_peak_memory_stats();

}  // namespace ag
