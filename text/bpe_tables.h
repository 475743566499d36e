// The tables behind a BytePairEncoding and its merge loop, shared by encoding (bpe.cpp),
// GPT-2's files (gpt2_vocab.cpp) and training (bpe_train.cpp). Internal: not installed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attograd/text/bpe.h"
#include "attograd/text/pretokenize.h"

namespace ag {

// The pair (left, right) as one hash key.
inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Merge ranks by pair: open addressing with linear probing in a power-of-two table kept at most
// half full, so a lookup is a multiply, a shift and mostly one cache line. (With
// std::unordered_map, a node per entry, these lookups took 16% of encoding time under perf.)
class PairRanks {
 public:
  // Room for n pairs; call once, before the inserts.
  void reserve(size_t n) {
    int bits = 4;
    while ((size_t{1} << bits) < 2 * n) ++bits;
    shift_ = 64 - bits;
    keys_.assign(size_t{1} << bits, kEmpty);
    ranks_.assign(size_t{1} << bits, -1);
  }
  // False when the pair is there already.
  bool insert(uint64_t key, int32_t rank) {
    size_t i = slot(key);
    for (; keys_[i] != kEmpty; i = (i + 1) & (keys_.size() - 1)) {
      if (keys_[i] == key) return false;
    }
    keys_[i] = key;
    ranks_[i] = rank;
    return true;
  }
  // The rank of the pair, or -1 when it does not merge.
  int32_t find(uint64_t key) const {
    for (size_t i = slot(key);; i = (i + 1) & (keys_.size() - 1)) {
      if (keys_[i] == key) return ranks_[i];
      if (keys_[i] == kEmpty) return -1;
    }
  }

 private:
  // pair_key of two non-negative ids never has all bits set.
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<uint64_t> keys_ = std::vector<uint64_t>(1, kEmpty);
  std::vector<int32_t> ranks_ = std::vector<int32_t>(1, -1);
  int shift_ = 63;
};

// Lets a map keyed by std::string be searched with a std::string_view (no copy per lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct BytePairEncoding::Tables {
  Tables(const std::string& pattern_text, const std::string& source) : pretokenizer(pattern_text, source) {}

  Pretokenizer pretokenizer;
  std::string pattern;
  ByteOrder order = ByteOrder::natural;
  std::vector<BPEMerge> merges;
  std::vector<std::string> specials;
  std::vector<std::string> tokens;  // the bytes of every id
  int32_t byte_id[256] = {};
  PairRanks ranks;  // (left, right) -> merge index

  // The merge index of the pair, or -1 when it does not merge.
  int32_t rank(int32_t left, int32_t right) const { return ranks.find(pair_key(left, right)); }
};

// GPT-2's byte-to-unicode table keeps the bytes that print as themselves in Latin-1 ('!' to '~',
// U+00A1 to U+00AC, U+00AE to U+00FF) and moves the rest (controls, space, soft hyphen) to U+0100 up.
inline bool gpt2_prints_as_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

// GPT-2's byte order: the byte of each of the ids 0..255.
std::vector<unsigned char> gpt2_byte_order();

// Scratch space of merge_chunk, kept between calls so that encoding allocates once.
struct MergeWork {
  struct Entry {
    int32_t rank, position;
  };
  std::vector<int32_t> token, next, prev;
  std::vector<Entry> heap;
};

// Appends the tokens of one chunk to `out`: its bytes, merged by rank.
void merge_chunk(const BytePairEncoding::Tables& t, std::string_view chunk, MergeWork& work, std::vector<int32_t>& out);

// The merge loop itself, over the n tokens the caller put in w.token[0, n): rank(left, right) is
// the rank of the pair's merge or -1, merged(rank) the id that merge makes (256 + rank in our own
// vocabularies; any id in a Hugging Face file, where several merges may make one token). Appends
// the merged tokens to `out`.
//
// The tokens form a linked list and the mergeable pairs a min-heap by (rank, position): the
// earliest merge first and, among equal pairs, the leftmost, which is how GPT-2 and Hugging
// Face's BPE apply a merge to every occurrence at once. A heap entry goes stale when a merge next
// to it changes its pair; it is dropped when popped.
template <typename Rank, typename Merged>
void merge_tokens(int32_t n, MergeWork& w, const Rank& rank, const Merged& merged, std::vector<int32_t>& out) {
  if (n == 0) return;
  w.next.resize(static_cast<size_t>(n));
  w.prev.resize(static_cast<size_t>(n));
  w.heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    w.next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
    w.prev[static_cast<size_t>(i)] = i - 1;
  }
  const auto greater = [](const MergeWork::Entry& a, const MergeWork::Entry& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
  };
  const auto consider = [&](int32_t left) {  // the pair starting at node `left`, if it merges
    const int32_t right = left < 0 ? -1 : w.next[static_cast<size_t>(left)];
    if (right < 0) return;
    const int32_t r = rank(w.token[static_cast<size_t>(left)], w.token[static_cast<size_t>(right)]);
    if (r < 0) return;
    w.heap.push_back({r, left});
    std::push_heap(w.heap.begin(), w.heap.end(), greater);
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!w.heap.empty()) {
    std::pop_heap(w.heap.begin(), w.heap.end(), greater);
    const MergeWork::Entry e = w.heap.back();
    w.heap.pop_back();
    const size_t left = static_cast<size_t>(e.position);
    const int32_t right = w.next[left];
    // A removed node keeps token -1, so a stale entry pointing at it finds no pair.
    if (right < 0 || w.token[left] < 0 || rank(w.token[left], w.token[static_cast<size_t>(right)]) != e.rank) continue;
    w.token[left] = merged(e.rank);
    w.token[static_cast<size_t>(right)] = -1;
    const int32_t after = w.next[static_cast<size_t>(right)];
    w.next[left] = after;
    if (after >= 0) w.prev[static_cast<size_t>(after)] = e.position;
    consider(w.prev[left]);
    consider(e.position);
  }
  // Merges remove the right node of a pair, so the first node stays the head of the list.
  for (int32_t i = 0; i >= 0; i = w.next[static_cast<size_t>(i)]) out.push_back(w.token[static_cast<size_t>(i)]);
}

}  // namespace ag
