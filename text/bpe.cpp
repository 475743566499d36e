// Byte-pair encoding (bpe.h): the tables, the merge loop, encoding and decoding, the JSON
// description and its file. GPT-2's own two files are read in gpt2_vocab.cpp, training is in
// bpe_train.cpp.
#include "attograd/text/bpe.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "attograd/core/parallel.h"
#include "attograd/text/bpe_tables.h"
#include "attograd/text/utf8.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/json_text.h"

namespace ag {

// ---------------------------------------------------------------------------------------------
// Tables

std::vector<unsigned char> gpt2_byte_order() {
  // GPT-2 gives the printable bytes of Latin-1 their own characters and moves the others
  // (controls, space, soft hyphen, ...) to U+0100 and up, so that every token reads as text; its
  // byte tokens are numbered in that order: the printable bytes first, then the rest.
  std::vector<unsigned char> order;
  for (int b = 0; b < 256; ++b) {
    if (gpt2_prints_as_itself(b)) order.push_back(static_cast<unsigned char>(b));
  }
  for (int b = 0; b < 256; ++b) {
    if (!gpt2_prints_as_itself(b)) order.push_back(static_cast<unsigned char>(b));
  }
  return order;
}

namespace {

std::string where(const std::string& source) { return source.empty() ? "byte-pair encoding" : source; }

// Each token's bytes and the vocabulary's, from the merges' ids alone, before any token is built.
void check_sizes(const std::vector<BPEMerge>& merges, const std::vector<std::string>& specials,
                 const std::string& source) {
  std::vector<int64_t> bytes(256, 1);
  bytes.reserve(256 + merges.size());
  int64_t total = 256;
  for (size_t i = 0; i < merges.size(); ++i) {
    const BPEMerge& m = merges[i];
    const int64_t known = static_cast<int64_t>(bytes.size());
    if (m.left < 0 || m.left >= known || m.right < 0 || m.right >= known) break;  // the constructor names it
    const int64_t n = bytes[static_cast<size_t>(m.left)] + bytes[static_cast<size_t>(m.right)];
    if (n > kMaxBPETokenBytes) {
      throw std::invalid_argument(where(source) + ": merge " + std::to_string(i) + " (" + std::to_string(m.left) + ", " +
                                  std::to_string(m.right) + ") makes a token of " + std::to_string(n) +
                                  " bytes, more than the " + std::to_string(kMaxBPETokenBytes) + " a token may hold");
    }
    bytes.push_back(n);
    total += n;
    if (total > kMaxBPEVocabularyBytes) {
      throw std::invalid_argument(where(source) + ": the tokens of the first " + std::to_string(i + 1) +
                                  " merges hold " + std::to_string(total) + " bytes, more than the " +
                                  std::to_string(kMaxBPEVocabularyBytes) + " a vocabulary may hold");
    }
  }
  for (const std::string& s : specials) total += static_cast<int64_t>(s.size());
  if (total > kMaxBPEVocabularyBytes) {
    throw std::invalid_argument(where(source) + ": the tokens hold " + std::to_string(total) + " bytes, more than the " +
                                std::to_string(kMaxBPEVocabularyBytes) + " a vocabulary may hold");
  }
}

}  // namespace

BytePairEncoding::BytePairEncoding(std::string pattern, ByteOrder order, std::vector<BPEMerge> merges,
                                   std::vector<std::string> specials, const std::string& source) {
  // An empty pattern splits nothing: every chunk would be empty and no merge would ever apply.
  if (pattern.empty()) throw std::invalid_argument(where(source) + ": the pre-tokenisation pattern is empty");
  check_sizes(merges, specials, source);
  auto t = std::make_shared<Tables>(pattern, source);
  t->pattern = std::move(pattern);
  t->order = order;
  const std::vector<unsigned char> bytes = order == ByteOrder::gpt2 ? gpt2_byte_order() : std::vector<unsigned char>{};
  for (int id = 0; id < 256; ++id) {
    const unsigned char b = order == ByteOrder::gpt2 ? bytes[static_cast<size_t>(id)] : static_cast<unsigned char>(id);
    t->tokens.emplace_back(1, static_cast<char>(b));
    t->byte_id[b] = id;
  }
  t->ranks.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const BPEMerge& m = merges[i];
    const int64_t known = 256 + static_cast<int64_t>(i);  // ids that exist before merge i
    if (m.left < 0 || m.left >= known || m.right < 0 || m.right >= known) {
      throw std::invalid_argument(where(source) + ": merge " + std::to_string(i) + " (" + std::to_string(m.left) + ", " +
                                  std::to_string(m.right) + ") names a token that does not exist before it (ids 0.." +
                                  std::to_string(known - 1) + ")");
    }
    if (!t->ranks.insert(pair_key(m.left, m.right), static_cast<int32_t>(i))) {
      throw std::invalid_argument(where(source) + ": merge " + std::to_string(i) + " (" + std::to_string(m.left) + ", " +
                                  std::to_string(m.right) + ") appears twice");
    }
    t->tokens.push_back(t->tokens[static_cast<size_t>(m.left)] + t->tokens[static_cast<size_t>(m.right)]);
  }
  for (size_t i = 0; i < specials.size(); ++i) {
    if (specials[i].empty()) throw std::invalid_argument(where(source) + ": special token " + std::to_string(i) + " is empty");
    // A vocabulary is kept as JSON, whose strings are UTF-8.
    for (size_t at = 0; at < specials[i].size();) {
      const CodePoint cp = decode_utf8(specials[i], at);
      if (cp.length == 0) {
        throw std::invalid_argument(where(source) + ": special token " + std::to_string(i) + " is not valid UTF-8 at byte " +
                                    std::to_string(at) + " (" + cp.problem + ")");
      }
      at += cp.length;
    }
    for (size_t j = 0; j < i; ++j) {
      if (specials[j] == specials[i]) {
        throw std::invalid_argument(where(source) + ": special token \"" + specials[i] + "\" appears twice");
      }
    }
    t->tokens.push_back(specials[i]);
  }
  t->merges = std::move(merges);
  t->specials = std::move(specials);
  tables_ = std::move(t);
}

int64_t BytePairEncoding::vocab_size() const { return static_cast<int64_t>(tables_->tokens.size()); }
const std::string& BytePairEncoding::pattern() const { return tables_->pattern; }
ByteOrder BytePairEncoding::byte_order() const { return tables_->order; }
const std::vector<BPEMerge>& BytePairEncoding::merges() const { return tables_->merges; }
const std::vector<std::string>& BytePairEncoding::specials() const { return tables_->specials; }

// ---------------------------------------------------------------------------------------------
// The merge loop

void merge_chunk(const BytePairEncoding::Tables& t, std::string_view chunk, MergeWork& w, std::vector<int32_t>& out) {
  const int32_t n = static_cast<int32_t>(chunk.size());
  w.token.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) w.token[static_cast<size_t>(i)] = t.byte_id[static_cast<unsigned char>(chunk[static_cast<size_t>(i)])];
  merge_tokens(n, w, [&](int32_t left, int32_t right) { return t.rank(left, right); },
               [](int32_t rank) { return 256 + rank; }, out);
}

// ---------------------------------------------------------------------------------------------
// Encoding

namespace {

// Encodes text that holds no special token, chunk by chunk; `cache` maps each chunk seen in
// this call to its tokens.
class ChunkEncoder {
 public:
  explicit ChunkEncoder(const BytePairEncoding::Tables& t) : t_(t), matcher_(t.pretokenizer.matcher()) {}

  void encode(std::string_view text, std::vector<int64_t>& out) {
    t_.pretokenizer.for_each_chunk(*matcher_, text, [&](std::string_view chunk) {
      if (chunk.size() == 1) {  // no merge to look for
        out.push_back(t_.byte_id[static_cast<unsigned char>(chunk[0])]);
        return;
      }
      auto it = cache_.find(chunk);
      if (it == cache_.end()) {
        // A text of random bytes has few repeated chunks: past this many entries the cache
        // starts again rather than grow without bound.
        if (cache_.size() >= kMaxCached) cache_.clear();
        std::vector<int32_t> ids;
        merge_chunk(t_, chunk, work_, ids);
        it = cache_.emplace(std::string(chunk), std::move(ids)).first;
      }
      out.insert(out.end(), it->second.begin(), it->second.end());
    });
  }

 private:
  static constexpr size_t kMaxCached = size_t{1} << 20;
  const BytePairEncoding::Tables& t_;
  std::unique_ptr<Pretokenizer::Matcher> matcher_;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
  MergeWork work_;
};

// The earliest occurrence of any special at or after `from`: its position and index, or
// (npos, -1). The longest special wins when two start at the same byte.
std::pair<size_t, int64_t> next_special(std::string_view text, size_t from, const std::vector<std::string>& specials) {
  std::pair<size_t, int64_t> best{std::string_view::npos, -1};
  for (size_t i = 0; i < specials.size(); ++i) {
    const size_t at = text.find(specials[i], from);
    if (at == std::string_view::npos) continue;
    if (at < best.first || (at == best.first && specials[i].size() > specials[static_cast<size_t>(best.second)].size())) {
      best = {at, static_cast<int64_t>(i)};
    }
  }
  return best;
}

void encode_part(const BytePairEncoding::Tables& t, std::string_view text, std::vector<int64_t>& out) {
  ChunkEncoder chunks(t);
  const int64_t first_special = 256 + static_cast<int64_t>(t.merges.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const auto [at, special] = next_special(text, pos, t.specials);
    const size_t end = special < 0 ? text.size() : at;
    chunks.encode(text.substr(pos, end - pos), out);
    if (special < 0) break;
    out.push_back(first_special + special);
    pos = at + t.specials[static_cast<size_t>(special)].size();
  }
}

}  // namespace

std::vector<int64_t> BytePairEncoding::encode(std::string_view text, int threads) const {
  const Tables& t = *tables_;
  // Below a few hundred KB a second thread costs more than it saves. Each part fills a chunk
  // cache of its own, so parts that one thread would run one after the other (the pool sees
  // the cores taken by other programs) are slower than no split: split only for threads that
  // can run now.
  constexpr size_t kMinPart = size_t{1} << 18;
  const int64_t usable = threads > 1 ? std::min(threads, detail::threads_to_use()) : 1;
  const int64_t pieces = std::min<int64_t>(usable, static_cast<int64_t>(text.size() / kMinPart));
  std::vector<int64_t> ids;
  if (pieces <= 1) {
    ids.reserve(text.size() / 3);
    encode_part(t, text, ids);
    return ids;
  }
  const std::vector<size_t> cuts = independent_parts(text, pieces, t.specials);
  const int64_t parts = static_cast<int64_t>(cuts.size()) - 1;
  std::vector<std::vector<int64_t>> part_ids(static_cast<size_t>(parts));
  parallel_for(parts, parts, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const size_t from = cuts[static_cast<size_t>(p)], to = cuts[static_cast<size_t>(p) + 1];
      part_ids[static_cast<size_t>(p)].reserve((to - from) / 3);
      encode_part(t, text.substr(from, to - from), part_ids[static_cast<size_t>(p)]);
    }
  });
  size_t total = 0;
  for (const auto& p : part_ids) total += p.size();
  ids.reserve(total);
  for (const auto& p : part_ids) ids.insert(ids.end(), p.begin(), p.end());
  return ids;
}

const std::string& BytePairEncoding::token_bytes(int64_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::invalid_argument("BytePairEncoding::decode: id " + std::to_string(id) + " is outside [0, " +
                                std::to_string(vocab_size()) + ")");
  }
  return tables_->tokens[static_cast<size_t>(id)];
}

std::string BytePairEncoding::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size() * 4);
  for (int64_t id : ids) text += token_bytes(id);
  return text;
}

// ---------------------------------------------------------------------------------------------
// The description and its file

std::string BytePairEncoding::to_json() const {
  const Tables& t = *tables_;
  OrderedJson merges = OrderedJson::array();
  for (const BPEMerge& m : t.merges) merges.push_back({m.left, m.right});
  OrderedJson j = {{"kind", "bpe"},
                   {"pattern", t.pattern},
                   {"byte_order", t.order == ByteOrder::gpt2 ? "gpt2" : "natural"},
                   {"specials", t.specials},
                   {"merges", std::move(merges)}};
  return j.dump();
}

BytePairEncoding BytePairEncoding::from_json(const std::string& json, const std::string& source) {
  const std::string op = source + ": ";
  const Json j = parse_options_object(json, {"kind", "pattern", "byte_order", "specials", "merges"}, op);
  const auto field = [&](const char* key) -> const Json& {
    const auto it = j.find(key);
    if (it == j.end()) throw std::invalid_argument(op + "missing \"" + key + "\" in the byte-pair encoding");
    return *it;
  };
  if (field("kind") != "bpe") throw std::invalid_argument(op + "\"kind\" is " + field("kind").dump() + ", not \"bpe\"");
  if (!field("pattern").is_string()) throw std::invalid_argument(op + "\"pattern\" must be a string");
  const Json& order = field("byte_order");
  if (order != "natural" && order != "gpt2") {
    throw std::invalid_argument(op + "\"byte_order\" must be \"natural\" or \"gpt2\", got " + order.dump());
  }
  const Json& specials_json = field("specials");
  std::vector<std::string> specials;
  if (!specials_json.is_array()) throw std::invalid_argument(op + "\"specials\" must be an array of strings");
  for (const Json& s : specials_json) {
    if (!s.is_string()) throw std::invalid_argument(op + "\"specials\" must be an array of strings, got " + s.dump());
    specials.push_back(s.get<std::string>());
  }
  const Json& merges_json = field("merges");
  if (!merges_json.is_array()) throw std::invalid_argument(op + "\"merges\" must be an array of [left, right] pairs");
  std::vector<BPEMerge> merges;
  merges.reserve(merges_json.size());
  for (size_t i = 0; i < merges_json.size(); ++i) {
    const Json& m = merges_json[i];
    const int64_t left = m.is_array() && m.size() == 2 ? json_int64(m[0]).value_or(-1) : -1;
    const int64_t right = m.is_array() && m.size() == 2 ? json_int64(m[1]).value_or(-1) : -1;
    if (left < 0 || right < 0 || left > INT32_MAX || right > INT32_MAX) {
      throw std::invalid_argument(op + "merge " + std::to_string(i) + " must be a pair of token ids, got " + m.dump());
    }
    merges.push_back({static_cast<int32_t>(left), static_cast<int32_t>(right)});
  }
  return BytePairEncoding(field("pattern").get<std::string>(), order == "gpt2" ? ByteOrder::gpt2 : ByteOrder::natural,
                          std::move(merges), std::move(specials), source);
}

void BytePairEncoding::save(const std::string& path) const { write_file_atomically(path, to_json() + "\n"); }

BytePairEncoding BytePairEncoding::load(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("byte-pair encoding: ") + e.what());
  }
  if (text.empty()) throw std::invalid_argument("'" + path + "' is empty, not a byte-pair encoding file");
  return from_json(text, "'" + path + "'");
}

}  // namespace ag
