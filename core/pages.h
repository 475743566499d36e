// Whole-page blocks mapped from the kernel, for Storage's cache (core/storage.cpp). Their pages
// can move from one block to another with mremap, so a new block can be made of resident pages
// that cached blocks hold: no copy, no page faults, no growth of the RSS. A block made that way
// spans several kernel mappings ("pieces"), which this file remembers (mremap moves within one
// mapping only). Internal: not installed.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>

namespace ag::pages {

// `bytes` (a multiple of the page size) of fresh zero pages; null when the system refuses.
void* map(std::size_t bytes);

// Gives a block back to the system, all its pieces at once.
void unmap(void* block, std::size_t bytes);

// A block of `bytes` made of the pages of donor blocks: `donor(need)` hands over a block (its
// address and size) while `need` bytes are still missing; what the last donor does not need
// goes to `keep(rest, rest_bytes)` when it is at least `min_kept` bytes, else back to the
// system. Null, with the pages taken given back, when the block would need more than 16 pieces
// or a move fails.
using Donor = std::function<std::pair<void*, std::size_t>(std::size_t need)>;
using Keep = std::function<void(void* rest, std::size_t rest_bytes)>;
void* assemble(std::size_t bytes, const Donor& donor, const Keep& keep, std::size_t min_kept);

}  // namespace ag::pages
