// The "hf_bpe" tokenizer kind (hf_tokenizer.h): a Hugging Face byte-level BPE that encodes a
// text as the reference does, in the order of hf_tokenizer.h's steps.
#include "attograd/text/hf_bpe.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/utypes.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attograd/core/parallel.h"
#include "attograd/core/threads.h"
#include "attograd/text/bpe_tables.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/text/pretokenize.h"
#include "attograd/text/utf8.h"

namespace ag {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// How many bytes at text[pos] (which do not start a valid character) one U+FFFD replaces: the
// lead byte and the continuation bytes after it that could still have completed a character
// (Unicode's maximal subpart, as the WHATWG decoder counts it); a byte that can lead nothing
// alone.
size_t maximal_subpart(std::string_view text, size_t pos) {
  const unsigned char lead = static_cast<unsigned char>(text[pos]);
  size_t need = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  }
  size_t k = 0;
  while (k < need && pos + 1 + k < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[pos + 1 + k]);
    if (c < (k == 0 ? low : 0x80) || c > (k == 0 ? high : 0xBF)) break;
    ++k;
  }
  return 1 + k;
}

std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t pos = 0; pos < text.size();) {
    const size_t valid_end = valid_utf8_end(text, pos);
    out.append(text.substr(pos, valid_end - pos));
    if (valid_end >= text.size()) break;
    out.append(kReplacement);
    pos = valid_end + maximal_subpart(text, valid_end);
  }
  return out;
}

// Every code point below U+0300 (no byte from 0xCC up) is left alone by NFC: the characters that
// NFC changes or composes onto a previous one all lie above. Most text skips ICU altogether.
bool nfc_may_change(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0xCC; });
}

std::string to_nfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  if (U_SUCCESS(status)) {
    nfc->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, status);
  }
  if (U_FAILURE(status)) throw std::runtime_error(std::string("hf_bpe: ICU's NFC normalization failed: ") + u_errorName(status));
  return out;
}

// Unicode's White_Space, what an added token's lstrip/rstrip takes (Rust's char::is_whitespace).
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The patterns of GPT-2, Llama 3 and Qwen2/Qwen3: no alternative of theirs runs from a newline
// into a visible character or looks behind, so a newline followed by a visible ASCII character
// always ends a chunk, and a text may be cut there (for threads, for corpora in pieces). Another
// file's pattern gets no cut.
bool known_safe_pattern(const std::string& p) {
  static const char* const kSafe[] = {
      kGPT2Pattern,
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
  };
  return std::any_of(std::begin(kSafe), std::end(kSafe), [&](const char* s) { return p == s; });
}

class HFByteLevelTokens final : public TokenizerKind {
 public:
  HFByteLevelTokens(HFByteLevelBPE spec, const std::string& source)
      : spec_(std::move(spec)), pretokenizer_(spec_.pattern, source), cuttable_(known_safe_pattern(spec_.pattern)) {
    for (int32_t id = 0; id < static_cast<int32_t>(spec_.tokens.size()); ++id) {
      if (!spec_.in_model[static_cast<size_t>(id)]) continue;
      const std::string& t = spec_.tokens[static_cast<size_t>(id)];
      if (t.size() == 1) byte_id_[static_cast<unsigned char>(t[0])] = id;
      if (spec_.ignore_merges) vocab_.emplace(t, id);
    }
    // A pair listed twice keeps its last rank, as both references build their tables.
    std::unordered_map<uint64_t, size_t> last;
    for (size_t i = 0; i < spec_.merges.size(); ++i) last[pair_key(spec_.merges[i].left, spec_.merges[i].right)] = i;
    ranks_.reserve(last.size());
    merged_.reserve(spec_.merges.size());
    for (size_t i = 0; i < spec_.merges.size(); ++i) {
      const HFMerge& m = spec_.merges[i];
      merged_.push_back(m.merged);
      if (last[pair_key(m.left, m.right)] == i) ranks_.insert(pair_key(m.left, m.right), static_cast<int32_t>(i));
    }
    for (size_t i = 0; i < spec_.added.size(); ++i) {
      const std::string& c = spec_.added[i].content;
      by_first_byte_[static_cast<unsigned char>(c[0])].push_back(i);
      contents_.push_back(c);
      cuttable_ = cuttable_ && !spec_.added[i].lstrip;  // it would take the newline before a cut
    }
    for (auto& list : by_first_byte_) {  // longest first: the first match at a place is the longest
      std::stable_sort(list.begin(), list.end(),
                       [&](size_t a, size_t b) { return spec_.added[a].content.size() > spec_.added[b].content.size(); });
    }
  }

  const char* name() const override { return kHFTokenizerKind; }
  int64_t vocab_size() const override { return static_cast<int64_t>(spec_.tokens.size()); }
  std::string token(int64_t id) const override { return spec_.tokens[static_cast<size_t>(id)]; }
  std::string to_json() const override { return hf_bpe_json(spec_, true); }

  std::vector<int64_t> encode(const std::string& raw) const override {
    std::string fixed;
    std::string_view text = raw;
    if (valid_utf8_end(raw, 0) != raw.size()) {
      fixed = replace_invalid_utf8(raw);
      text = fixed;
    }
    // As bpe.cpp: below a few hundred KB a second thread costs more than it saves.
    constexpr size_t kMinPart = size_t{1} << 18;
    const int64_t usable = in_parallel_region() || !cuttable_ ? 1 : std::min<int64_t>(num_threads(), detail::threads_to_use());
    const int64_t pieces = std::min<int64_t>(usable, static_cast<int64_t>(text.size() / kMinPart));
    std::vector<int64_t> ids;
    if (pieces <= 1) {
      encode_part(text, ids);
      return ids;
    }
    const std::vector<size_t> cuts = independent_parts(text, pieces, contents_);
    const int64_t parts = static_cast<int64_t>(cuts.size()) - 1;
    std::vector<std::vector<int64_t>> part_ids(static_cast<size_t>(parts));
    parallel_for(parts, parts, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const size_t from = cuts[static_cast<size_t>(p)], to = cuts[static_cast<size_t>(p) + 1];
        encode_part(text.substr(from, to - from), part_ids[static_cast<size_t>(p)]);
      }
    });
    for (const auto& p : part_ids) ids.insert(ids.end(), p.begin(), p.end());
    return ids;
  }

  size_t last_safe_cut(std::string_view text, size_t from) const override {
    if (!cuttable_) return 0;
    size_t cut = TokenizerKind::last_safe_cut(text, from);
    // Not inside an added token (one may hold a newline).
    while (cut > 0 && inside_added(text, cut)) cut = cut - 1 > from ? TokenizerKind::last_safe_cut(text.substr(0, cut - 1), from) : 0;
    return cut;
  }

 private:
  struct Work {
    std::unique_ptr<Pretokenizer::Matcher> matcher;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache;
    MergeWork merge;
    std::vector<int32_t> scratch;
  };

  bool inside_added(std::string_view text, size_t cut) const {
    for (const std::string& s : contents_) {
      const size_t found = text.find(s, cut >= s.size() ? cut - s.size() + 1 : 0);
      if (found != std::string_view::npos && found < cut) return true;
    }
    return false;
  }

  // The leftmost added token at or after `from`, the longest there: (position, index) or (npos, -1).
  std::pair<size_t, int64_t> next_added(std::string_view text, size_t from) const {
    for (size_t at = from; at < text.size(); ++at) {
      for (size_t i : by_first_byte_[static_cast<unsigned char>(text[at])]) {
        if (text.compare(at, spec_.added[i].content.size(), spec_.added[i].content) == 0) return {at, static_cast<int64_t>(i)};
      }
    }
    return {std::string_view::npos, -1};
  }

  void encode_part(std::string_view text, std::vector<int64_t>& out) const {
    Work w{.matcher = pretokenizer_.matcher(), .cache = {}, .merge = {}, .scratch = {}};
    out.reserve(out.size() + text.size() / 3);
    size_t pos = 0;
    while (pos < text.size()) {
      const auto [at, k] = next_added(text, pos);
      size_t end = k < 0 ? text.size() : at;
      if (k >= 0 && spec_.added[static_cast<size_t>(k)].lstrip) {
        while (end > pos) {  // step back over whole whitespace characters
          size_t start = end - 1;
          while (start > pos && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
          if (!is_white_space(decode_utf8(text, start).value)) break;
          end = start;
        }
      }
      encode_section(text.substr(pos, end - pos), w, out);
      if (k < 0) break;
      const HFAddedToken& added = spec_.added[static_cast<size_t>(k)];
      out.push_back(added.id);
      pos = at + added.content.size();
      while (added.rstrip && pos < text.size() && is_white_space(decode_utf8(text, pos).value)) pos += decode_utf8(text, pos).length;
    }
  }

  void encode_section(std::string_view section, Work& w, std::vector<int64_t>& out) const {
    std::string normalized;
    if (spec_.nfc && nfc_may_change(section)) {
      normalized = to_nfc(section);
      section = normalized;
    }
    pretokenizer_.for_each_chunk(*w.matcher, section, [&](std::string_view chunk) {
      if (chunk.size() == 1) {
        out.push_back(byte_id_[static_cast<unsigned char>(chunk[0])]);
        return;
      }
      auto it = w.cache.find(chunk);
      if (it == w.cache.end()) {
        if (w.cache.size() >= (size_t{1} << 20)) w.cache.clear();  // bounded, as bpe.cpp's
        it = w.cache.emplace(std::string(chunk), merge(chunk, w)).first;
      }
      out.insert(out.end(), it->second.begin(), it->second.end());
    });
  }

  std::vector<int32_t> merge(std::string_view chunk, Work& w) const {
    if (spec_.ignore_merges) {
      // Llama 3's ignore_merges: a chunk that is a token is that token, even where the merges
      // would reach another split (its vocabulary comes from tiktoken, which looks tokens up whole).
      const auto it = vocab_.find(chunk);
      if (it != vocab_.end()) return {it->second};
    }
    const int32_t n = static_cast<int32_t>(chunk.size());
    w.merge.token.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) w.merge.token[static_cast<size_t>(i)] = byte_id_[static_cast<unsigned char>(chunk[static_cast<size_t>(i)])];
    std::vector<int32_t> ids;
    merge_tokens(n, w.merge, [&](int32_t l, int32_t r) { return ranks_.find(pair_key(l, r)); },
                 [&](int32_t rank) { return merged_[static_cast<size_t>(rank)]; }, ids);
    return ids;
  }

  HFByteLevelBPE spec_;
  Pretokenizer pretokenizer_;
  bool cuttable_;
  int32_t byte_id_[256] = {};
  PairRanks ranks_;
  std::vector<int32_t> merged_;  // by rank: the id the merge makes
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;  // for ignore_merges
  std::vector<size_t> by_first_byte_[256];  // added tokens by their first byte, longest first
  std::vector<std::string> contents_;       // the added tokens' texts
};

}  // namespace

std::shared_ptr<const TokenizerKind> make_hf_bpe_kind(HFByteLevelBPE spec, const std::string& source) {
  return std::make_shared<const HFByteLevelTokens>(std::move(spec), source);
}

}  // namespace ag
