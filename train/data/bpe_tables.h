// The tables behind a BytePairEncoding and its merge loop, shared by encoding (bpe.cpp),
// GPT-2's files (gpt2_vocab.cpp) and training (bpe_train.cpp). Internal: not installed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attograd/train/data/bpe.h"
#include "attograd/train/data/pretokenize.h"

namespace ag {

// The pair (left, right) as one hash key.
inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

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
  std::unordered_map<uint64_t, int32_t> ranks;  // (left, right) -> merge index

  // The merge index of the pair, or -1 when it does not merge.
  int32_t rank(int32_t left, int32_t right) const {
    const auto it = ranks.find(pair_key(left, right));
    return it == ranks.end() ? -1 : it->second;
  }
};

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

}  // namespace ag
