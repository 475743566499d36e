#include "attograd/core/pages.h"

#include <sys/mman.h>

#include <mutex>
#include <numeric>
#include <unordered_map>
#include <vector>

namespace ag::pages {

namespace {

// Beyond this many pieces a block is mapped afresh instead (the kernel allows ~65k mappings
// per process, and every piece is one).
constexpr std::size_t kMaxPieces = 16;

// The lengths, in address order, of the mappings of every block made of more than one.
struct PieceTable {
  std::mutex mutex;
  std::unordered_map<void*, std::vector<std::size_t>> table;

  std::vector<std::size_t> take(void* block, std::size_t bytes) {
    std::lock_guard lock(mutex);
    auto node = table.extract(block);
    return node ? std::move(node.mapped()) : std::vector<std::size_t>{bytes};
  }
  void put(void* block, std::vector<std::size_t> lengths) {
    if (lengths.size() < 2) return;
    std::lock_guard lock(mutex);
    table[block] = std::move(lengths);
  }
};

PieceTable& pieces() {
  static PieceTable* t = new PieceTable();  // never destroyed, like the cache that uses it
  return *t;
}

}  // namespace

void* map(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void unmap(void* block, std::size_t bytes) {
  pieces().take(block, bytes);
  munmap(block, bytes);  // one call covers every mapping in the range
}

void* assemble(std::size_t bytes, const Donor& donor, const Keep& keep, std::size_t min_kept) {
  void* const range = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) return nullptr;
  char* const dst = static_cast<char*>(range);
  std::vector<std::size_t> made;  // dst's pieces
  std::size_t filled = 0;
  bool failed = false;
  while (!failed && filled < bytes) {
    auto [block, size] = donor(bytes - filled);
    char* src = static_cast<char*>(block);
    char* rest = nullptr;  // where the pieces dst does not need begin
    std::vector<std::size_t> rest_pieces;
    for (const std::size_t piece : pieces().take(block, size)) {
      std::size_t n = failed ? 0 : std::min(piece, bytes - filled);
      if (n > 0 && (made.size() == kMaxPieces ||
                    mremap(src, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, dst + filled) == MAP_FAILED)) {
        failed = true;
        n = 0;
      }
      if (n > 0) made.push_back(n);
      filled += n;
      if (piece > n) {
        if (rest == nullptr) rest = src + n;
        rest_pieces.push_back(piece - n);
      }
      src += piece;
    }
    const std::size_t rest_bytes = std::accumulate(rest_pieces.begin(), rest_pieces.end(), std::size_t{0});
    if (rest_bytes >= min_kept && !failed) {
      pieces().put(rest, std::move(rest_pieces));
      keep(rest, rest_bytes);
    } else if (rest_bytes > 0) {
      munmap(rest, rest_bytes);
    }
  }
  if (failed) {
    munmap(dst, bytes);  // with whatever was moved into it
    return nullptr;
  }
  pieces().put(dst, std::move(made));
  return dst;
}

}  // namespace ag::pages
