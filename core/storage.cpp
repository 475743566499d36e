#include "core/storage.h"

#include <cstdlib>
#include <new>

namespace ag {

Storage::Storage(std::size_t bytes) : bytes_(bytes) {
  // aligned_alloc wants a size that is a multiple of the alignment; never ask for zero bytes.
  const std::size_t rounded = ((bytes + kAlignment - 1) / kAlignment) * kAlignment;
  data_ = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

Storage::~Storage() { std::free(data_); }

}  // namespace ag
