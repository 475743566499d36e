// Storage: one 64-byte aligned block of memory shared by every tensor that views it.
// A Tensor holds a std::shared_ptr<Storage>; views (transpose, slice, expand ...) share it.
// Freed blocks go to a process-wide cache keyed by size and are reused by the next allocation
// of that size (release_cached_memory() hands them back to the system).
#pragma once

#include <cstddef>
#include <memory>

namespace ag {

class Storage {
 public:
  static constexpr std::size_t kAlignment = 64;

  // Uninitialised memory of `bytes` bytes (the caller fills it).
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

}  // namespace ag
