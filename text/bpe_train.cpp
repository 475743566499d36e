// Training a byte-level BPE vocabulary (bpe.h, train_bpe): count the distinct chunks of the
// text, then merge the most frequent adjacent pair again and again, keeping the pair counts
// up to date as each merge rewrites the chunks that hold it.
//
// The work is on distinct chunks with their counts: English text has a few hundred thousand
// distinct chunks for millions of chunk occurrences. A merge of (a, b) visits only the chunks
// that hold the pair (the index `holders`), and changes the counts of the pairs around each
// occurrence; a max-heap of (count, pair) gives the next merge, its stale entries (whose count
// has changed since they were pushed) skipped when they reach the top.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attograd/core/parallel.h"
#include "attograd/core/threads.h"
#include "attograd/text/bpe.h"
#include "attograd/text/bpe_tables.h"

namespace ag {

namespace {

using ChunkCounts = std::unordered_map<std::string_view, int64_t>;

void check_no_nul(const TrainingText& t) {
  const size_t nul = t.text.find('\0');
  if (nul != std::string_view::npos) {
    throw std::invalid_argument("train_bpe: '" + t.name + "' holds a NUL byte at offset " + std::to_string(nul) +
                                ": it is not text (a binary file?)");
  }
}

// The distinct chunks of all texts with their counts, sorted by their bytes so that what
// follows does not depend on hash order or on how the counting was split over threads.
std::vector<std::pair<std::string_view, int64_t>> count_chunks(const std::vector<TrainingText>& texts,
                                                              const Pretokenizer& pre) {
  const int64_t pieces = num_threads();
  std::vector<std::string_view> parts;
  for (const TrainingText& t : texts) {
    const std::vector<size_t> cuts = independent_parts(t.text, pieces, {});
    for (size_t i = 0; i + 1 < cuts.size(); ++i) parts.push_back(t.text.substr(cuts[i], cuts[i + 1] - cuts[i]));
  }
  const int64_t n = static_cast<int64_t>(parts.size());
  std::vector<ChunkCounts> counts(parts.size());
  parallel_for(n, std::min<int64_t>(n, pieces), [&](int64_t begin, int64_t end) {
    const auto matcher = pre.matcher();
    for (int64_t p = begin; p < end; ++p) {
      ChunkCounts& c = counts[static_cast<size_t>(p)];
      pre.for_each_chunk(*matcher, parts[static_cast<size_t>(p)], [&](std::string_view chunk) { ++c[chunk]; });
    }
  });
  for (size_t p = 1; p < counts.size(); ++p) {
    for (const auto& [chunk, count] : counts[p]) counts[0][chunk] += count;
  }
  std::vector<std::pair<std::string_view, int64_t>> sorted;
  if (!counts.empty()) sorted.assign(counts[0].begin(), counts[0].end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

// The pairs of `tokens` as keys, sorted (with repeats).
void sorted_pairs(const std::vector<int32_t>& tokens, std::vector<uint64_t>& out) {
  out.clear();
  for (size_t i = 0; i + 1 < tokens.size(); ++i) out.push_back(pair_key(tokens[i], tokens[i + 1]));
  std::sort(out.begin(), out.end());
}

// Every occurrence of (a, b) in `tokens` replaced by `merged`, left to right (so a a a becomes
// merged a for a == b). False when the pair does not occur (a stale index entry).
bool apply_merge(std::vector<int32_t>& tokens, int32_t a, int32_t b, int32_t merged) {
  size_t out = 0;
  bool found = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i + 1 < tokens.size() && tokens[i] == a && tokens[i + 1] == b) {
      tokens[out++] = merged;
      ++i;
      found = true;
    } else {
      tokens[out++] = tokens[i];
    }
  }
  tokens.resize(out);
  return found;
}

class Trainer {
 public:
  explicit Trainer(const std::vector<std::pair<std::string_view, int64_t>>& chunks) {
    for (const auto& [chunk, count] : chunks) {
      std::vector<int32_t> tokens;
      for (char c : chunk) tokens.push_back(static_cast<unsigned char>(c));
      words_.push_back(std::move(tokens));
      counts_.push_back(count);
    }
    seen_.assign(words_.size(), -1);
    for (size_t w = 0; w < words_.size(); ++w) {
      for (size_t i = 0; i + 1 < words_[w].size(); ++i) {
        const uint64_t key = pair_key(words_[w][i], words_[w][i + 1]);
        pair_count_[key] += counts_[w];
        holders_[key].push_back(static_cast<int32_t>(w));
      }
    }
    for (const auto& [key, count] : pair_count_) push(key, count);
  }

  // The next merge, or false when no pair is left.
  bool next(BPEMerge& merge) {
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), before);
      const Entry e = heap_.back();
      heap_.pop_back();
      const auto it = pair_count_.find(e.key);
      if (it == pair_count_.end() || it->second != e.count) continue;  // stale
      merge = {static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key & 0xFFFFFFFFu)};
      return true;
    }
    return false;
  }

  void apply(const BPEMerge& m, int32_t merged) {
    const uint64_t key = pair_key(m.left, m.right);
    std::vector<int32_t> holders = std::move(holders_[key]);
    holders_.erase(key);
    touched_.clear();
    for (int32_t w : holders) {
      if (seen_[static_cast<size_t>(w)] == merged) continue;  // listed twice
      seen_[static_cast<size_t>(w)] = merged;
      update_word(static_cast<size_t>(w), m, merged);
    }
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (uint64_t k : touched_) {
      const auto it = pair_count_.find(k);
      if (it->second == 0) {
        pair_count_.erase(it);
      } else {
        push(k, it->second);
      }
    }
  }

 private:
  struct Entry {
    int64_t count;
    uint64_t key;
  };
  // Heap order: the highest count on top; among equal counts the smallest (left, right).
  static bool before(const Entry& x, const Entry& y) { return x.count != y.count ? x.count < y.count : x.key > y.key; }

  void push(uint64_t key, int64_t count) {
    heap_.push_back({count, key});
    std::push_heap(heap_.begin(), heap_.end(), before);
  }

  // Rewrites word w and moves the counts of the pairs it lost and gained (old and new pairs
  // compared as sorted lists, so a pair the merge did not touch is left alone).
  void update_word(size_t w, const BPEMerge& m, int32_t merged) {
    sorted_pairs(words_[w], old_pairs_);
    if (!apply_merge(words_[w], m.left, m.right, merged)) return;
    sorted_pairs(words_[w], new_pairs_);
    const int64_t c = counts_[w];
    size_t i = 0, j = 0;
    while (i < old_pairs_.size() || j < new_pairs_.size()) {
      if (j == new_pairs_.size() || (i < old_pairs_.size() && old_pairs_[i] < new_pairs_[j])) {
        pair_count_[old_pairs_[i]] -= c;
        touched_.push_back(old_pairs_[i++]);
      } else if (i == old_pairs_.size() || new_pairs_[j] < old_pairs_[i]) {
        pair_count_[new_pairs_[j]] += c;
        touched_.push_back(new_pairs_[j]);
        std::vector<int32_t>& h = holders_[new_pairs_[j++]];
        if (h.empty() || h.back() != static_cast<int32_t>(w)) h.push_back(static_cast<int32_t>(w));
      } else {
        ++i, ++j;  // in both: unchanged
      }
    }
  }

  std::vector<std::vector<int32_t>> words_;  // the distinct chunks, as tokens
  std::vector<int64_t> counts_;              // how often each occurs in the text
  std::vector<int32_t> seen_;                // the last merge that rewrote each word
  std::unordered_map<uint64_t, int64_t> pair_count_;
  std::unordered_map<uint64_t, std::vector<int32_t>> holders_;  // pair -> words that may hold it
  std::vector<Entry> heap_;
  std::vector<uint64_t> old_pairs_, new_pairs_, touched_;
};

}  // namespace

BytePairEncoding train_bpe(const std::vector<TrainingText>& texts, const BPETrainOptions& options) {
  const int64_t specials = static_cast<int64_t>(options.specials.size());
  const int64_t least = 256 + specials;
  if (options.vocab_size < least || options.vocab_size > INT32_MAX) {
    throw std::invalid_argument("train_bpe: the vocabulary size " + std::to_string(options.vocab_size) +
                                " is below the 256 byte tokens" + (specials > 0 ? " + " + std::to_string(specials) + " specials" : "") +
                                " = " + std::to_string(least) + (options.vocab_size > INT32_MAX ? " or too large" : ""));
  }
  if (texts.empty()) throw std::invalid_argument("train_bpe: no text to learn from");
  // The pattern and the specials are checked before the text is counted, not after training.
  (void)BytePairEncoding(options.pattern, ByteOrder::natural, {}, options.specials, "train_bpe");
  for (const TrainingText& t : texts) check_no_nul(t);
  const Pretokenizer pre(options.pattern, "train_bpe");
  Trainer trainer(count_chunks(texts, pre));
  const int64_t wanted = options.vocab_size - least;
  std::vector<BPEMerge> merges;
  merges.reserve(static_cast<size_t>(wanted));
  BPEMerge m;
  while (static_cast<int64_t>(merges.size()) < wanted) {
    if (!trainer.next(m)) {
      std::string names;
      for (const TrainingText& t : texts) names += (names.empty() ? "'" : ", '") + t.name + "'";
      throw std::invalid_argument("train_bpe: the vocabulary size " + std::to_string(options.vocab_size) +
                                  " is more than the text allows: " + names + " run out of pairs to merge after " +
                                  std::to_string(merges.size()) + " merges, a vocabulary of " +
                                  std::to_string(least + static_cast<int64_t>(merges.size())) + " tokens");
    }
    const int32_t merged = 256 + static_cast<int32_t>(merges.size());
    trainer.apply(m, merged);
    merges.push_back(m);
  }
  return BytePairEncoding(options.pattern, ByteOrder::natural, std::move(merges), options.specials, "train_bpe");
}

}  // namespace ag
