// The tokenizers of text/tokenizer.h: the built-in kinds (character-level, UTF-8 code points
// validated strictly; byte-level; byte-pair encoding), the registry of kinds, their JSON
// descriptions for checkpoints, and Utf8Printer (corpus.h).
#include "attograd/text/tokenizer.h"

#include "attograd/text/corpus.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/core/parallel.h"
#include "attograd/core/threads.h"
#include "attograd/text/bpe.h"
#include "attograd/text/hf_bpe.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/text/utf8.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

// ---------------------------------------------------------------------------------------------
// UTF-8

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", static_cast<unsigned>(b));
  return buf;
}

std::string code_point_name(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  return buf;
}

[[noreturn]] void throw_invalid_utf8(const std::string& op, const std::string& text, size_t pos, const char* problem) {
  throw std::invalid_argument(op + ": the text is not valid UTF-8 at byte offset " + std::to_string(pos) + " (byte " +
                              hex_byte(static_cast<unsigned char>(text[pos])) + ": " + problem +
                              "); use the byte-level tokenizer for text that is not UTF-8");
}

// A character as a reader can see it in a message: the character itself when printable, an
// escape for the usual control characters, always with its code point.
std::string printable(uint32_t cp, const std::string& utf8) {
  std::string shown;
  switch (cp) {
    case '\n': shown = "\\n"; break;
    case '\t': shown = "\\t"; break;
    case '\r': shown = "\\r"; break;
    default: shown = (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) ? "" : utf8; break;
  }
  if (shown.empty()) return code_point_name(cp);
  return "'" + shown + "' (" + code_point_name(cp) + ")";
}


}  // namespace

// ---------------------------------------------------------------------------------------------
// The built-in kinds

namespace {

bool printable_non_blank(char c) { return c > ' ' && c < 0x7f; }

// The 256 byte values: any bytes, and a cut anywhere.
class ByteTokens final : public TokenizerKind {
 public:
  const char* name() const override { return "byte"; }
  int64_t vocab_size() const override { return 256; }
  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> ids;
    ids.reserve(text.size());
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }
  std::string token(int64_t id) const override { return std::string(1, static_cast<char>(static_cast<unsigned char>(id))); }
  std::string to_json() const override { return R"({"kind":"byte"})"; }
  size_t last_safe_cut(std::string_view text, size_t) const override { return text.size() < 2 ? 0 : text.size() - 1; }
};

// The distinct UTF-8 characters of a text, sorted by their bytes: id = position.
class CharacterTokens final : public TokenizerKind {
 public:
  explicit CharacterTokens(std::vector<std::string> symbols) : symbols_(std::move(symbols)) {
    std::fill(std::begin(ascii_), std::end(ascii_), int64_t{-1});
    for (size_t i = 0; i < symbols_.size() && symbols_[i].size() == 1; ++i) {
      ascii_[static_cast<unsigned char>(symbols_[i][0])] = static_cast<int64_t>(i);
    }
  }
  const char* name() const override { return "char"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(symbols_.size()); }
  std::string token(int64_t id) const override { return symbols_[static_cast<size_t>(id)]; }
  std::string to_json() const override {
    // The symbols as JSON strings: the UTF-8 itself, so the description stays readable in a
    // checkpoint's metadata; JSON escapes the control characters.
    OrderedJson j = {{"kind", name()}};
    j["symbols"] = symbols_;
    return j.dump();
  }
  std::vector<int64_t> encode(const std::string& text) const override {
    const std::string op = "Tokenizer::encode";
    // Lookup: a table for ASCII, binary search over the sorted symbols for the rest.
    std::vector<int64_t> ids;
    ids.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      const CodePoint cp = decode_utf8(text, pos);
      if (cp.length == 0) throw_invalid_utf8(op, text, pos, cp.problem);
      int64_t id = -1;
      if (cp.value < 128) {
        id = ascii_[cp.value];
      } else {
        const std::string symbol = text.substr(pos, cp.length);
        const auto it = std::lower_bound(symbols_.begin(), symbols_.end(), symbol);
        if (it != symbols_.end() && *it == symbol) id = it - symbols_.begin();
      }
      if (id < 0) {
        throw std::invalid_argument(op + ": the text has a character the tokenizer does not know, " +
                                    printable(cp.value, text.substr(pos, cp.length)) + " at byte offset " +
                                    std::to_string(pos) + ": a character-level tokenizer knows only the " +
                                    std::to_string(symbols_.size()) +
                                    " characters of the text it was built from (a checkpoint's tokenizer, those of "
                                    "its training text)");
      }
      ids.push_back(id);
      pos += cp.length;
    }
    return ids;
  }

  static std::shared_ptr<const TokenizerKind> read(const std::string& json) {
    const std::string op = "Tokenizer::from_json: ";
    const Json j = parse_options_object(json, {"kind", "symbols"}, op);
    const auto symbols_it = j.find("symbols");
    if (symbols_it == j.end()) throw std::invalid_argument(op + "a char tokenizer needs \"symbols\"");
    if (!symbols_it->is_array()) {
      throw std::invalid_argument(op + "\"symbols\" must be an array of strings, got " + json_type_name(*symbols_it));
    }
    if (symbols_it->empty()) throw std::invalid_argument(op + "\"symbols\" is empty");
    std::vector<std::string> symbols;
    for (size_t i = 0; i < symbols_it->size(); ++i) {
      const Json& s = (*symbols_it)[i];
      const std::string where = "symbol " + std::to_string(i);
      if (!s.is_string()) throw std::invalid_argument(op + where + " must be a string, got " + s.dump());
      std::string symbol = s.get<std::string>();
      const CodePoint cp = symbol.empty() ? CodePoint{} : decode_utf8(symbol, 0);
      if (cp.length == 0 || cp.length != symbol.size()) {
        throw std::invalid_argument(op + where + " must be exactly one UTF-8 character, got " + s.dump());
      }
      if (!symbols.empty()) {
        // Ids are positions in the sorted list: a duplicate or an unsorted list is not what
        // characters() wrote and would silently map text to other ids.
        if (symbol == symbols.back()) throw std::invalid_argument(op + where + " " + s.dump() + " appears twice");
        if (symbol < symbols.back()) {
          throw std::invalid_argument(op + where + " " + s.dump() + " is out of order (the symbols are sorted by their bytes)");
        }
      }
      symbols.push_back(std::move(symbol));
    }
    return std::make_shared<const CharacterTokens>(std::move(symbols));
  }

 private:
  std::vector<std::string> symbols_;  // the UTF-8 bytes of each id
  int64_t ascii_[128];
};

// A byte-pair encoding (bpe.h).
class BytePairTokens final : public TokenizerKind {
 public:
  explicit BytePairTokens(std::shared_ptr<const BytePairEncoding> bpe) : bpe_(std::move(bpe)) {}
  const char* name() const override { return "bpe"; }
  int64_t vocab_size() const override { return bpe_->vocab_size(); }
  std::vector<int64_t> encode(const std::string& text) const override {
    return bpe_->encode(text, in_parallel_region() ? 1 : num_threads());
  }
  std::string token(int64_t id) const override { return bpe_->token_bytes(id); }
  std::string to_json() const override { return bpe_->to_json(); }
  const BytePairEncoding& encoding() const { return *bpe_; }

 private:
  std::shared_ptr<const BytePairEncoding> bpe_;
};

// The readers by kind name; the built-in ones first.
std::map<std::string, TokenizerReader>& readers() {
  static std::map<std::string, TokenizerReader> all = {
      {"byte",
       [](const std::string& json) -> std::shared_ptr<const TokenizerKind> {
         const std::string op = "Tokenizer::from_json: ";
         const Json j = parse_json(json);
         if (j.contains("symbols")) throw std::invalid_argument(op + "a byte tokenizer has no \"symbols\" (its vocabulary is the 256 bytes)");
         parse_options_object(json, {"kind"}, op);
         return std::make_shared<const ByteTokens>();
       }},
      {"char", &CharacterTokens::read},
      {kHFTokenizerKind, [](const std::string& json) { return read_hf_bpe_kind(json, "Tokenizer::from_json"); }},
      {"bpe",
       [](const std::string& json) -> std::shared_ptr<const TokenizerKind> {
         return std::make_shared<const BytePairTokens>(
             std::make_shared<const BytePairEncoding>(BytePairEncoding::from_json(json, "Tokenizer::from_json")));
       }},
  };
  return all;
}

std::mutex& readers_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

size_t TokenizerKind::last_safe_cut(std::string_view text, size_t from) const {
  if (text.size() < 2) return 0;
  // A newline at i with printable non-blanks at i - 1 and i + 1: cut at i + 1.
  for (size_t i = text.size() - 2; i >= std::max<size_t>(from, 1); --i) {
    if (text[i] == '\n' && printable_non_blank(text[i - 1]) && printable_non_blank(text[i + 1])) return i + 1;
  }
  return 0;
}

void register_tokenizer_kind(const std::string& name, TokenizerReader reader) {
  if (name.empty() || !reader) throw std::invalid_argument("register_tokenizer_kind: a kind needs a name and a reader");
  const std::lock_guard<std::mutex> lock(readers_mutex());
  if (!readers().emplace(name, std::move(reader)).second) {
    throw std::invalid_argument("register_tokenizer_kind: the kind \"" + name + "\" is registered already");
  }
}

std::vector<std::string> tokenizer_kind_names() {
  const std::lock_guard<std::mutex> lock(readers_mutex());
  std::vector<std::string> names;
  for (const auto& [name, reader] : readers()) names.push_back(name);
  return names;
}

// ---------------------------------------------------------------------------------------------
// Tokenizer

Tokenizer::Tokenizer() : kind_(std::make_shared<const ByteTokens>()) {}

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerKind> kind) : kind_(std::move(kind)) {
  if (!kind_) throw std::invalid_argument("Tokenizer: no kind given");
}

Tokenizer Tokenizer::characters(const std::string& text) {
  const std::string op = "Tokenizer::characters";
  if (text.empty()) throw std::invalid_argument(op + ": the text is empty");
  // One flag per code point: each distinct character is kept once, at its first occurrence, so
  // the pass is linear in the text and the one sort below is over the distinct characters only.
  std::vector<bool> seen(kCodePoints, false);
  std::vector<std::string> others;  // the distinct non-ASCII characters, as UTF-8
  for (size_t pos = 0; pos < text.size();) {
    const CodePoint cp = decode_utf8(text, pos);
    if (cp.length == 0) throw_invalid_utf8(op, text, pos, cp.problem);
    if (!seen[cp.value]) {
      seen[cp.value] = true;
      if (cp.value >= 128) others.push_back(text.substr(pos, cp.length));
    }
    pos += cp.length;
  }
  std::vector<std::string> symbols;
  for (uint32_t c = 0; c < 128; ++c) {
    if (seen[c]) symbols.push_back(std::string(1, static_cast<char>(c)));
  }
  // std::string compares bytes as unsigned char, so this is byte order, which for UTF-8 is also
  // code point order; every multi-byte character sorts after all of ASCII.
  std::sort(others.begin(), others.end());
  symbols.insert(symbols.end(), others.begin(), others.end());
  return Tokenizer(std::make_shared<const CharacterTokens>(std::move(symbols)));
}

Tokenizer Tokenizer::bytes() { return Tokenizer(); }

Tokenizer Tokenizer::bpe(const BytePairEncoding& encoding) {
  return Tokenizer(std::make_shared<const BytePairTokens>(std::make_shared<const BytePairEncoding>(encoding)));
}

const BytePairEncoding& Tokenizer::byte_pairs() const {
  const auto* b = dynamic_cast<const BytePairTokens*>(kind_.get());
  if (b == nullptr) throw std::logic_error(std::string("Tokenizer::byte_pairs: a ") + kind_name() + " tokenizer has no byte pairs");
  return b->encoding();
}

std::string describe_tokenizer(const Tokenizer& tokenizer) {
  std::string out = std::string(tokenizer.kind_name()) + " tokenizer of " + std::to_string(tokenizer.vocab_size()) + " ids";
  if (dynamic_cast<const ByteTokens*>(&tokenizer.kind()) != nullptr) return out;
  if (const auto* b = dynamic_cast<const BytePairTokens*>(&tokenizer.kind()); b && b->encoding().byte_order() == ByteOrder::gpt2) {
    out += " in GPT-2's byte order";
  }
  const std::string json = tokenizer.to_json();
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", crc32c(json.data(), json.size()));
  return out + " (description CRC-32C " + crc + ")";
}

std::string describe_tokenizer_json(const std::string& json) {
  try {
    return describe_tokenizer(Tokenizer::from_json(json));
  } catch (const std::exception& e) {
    return std::string("description that does not read as a tokenizer (") + e.what() + ")";
  }
}

Tokenizer Tokenizer::from_json(const std::string& json) {
  const std::string op = "Tokenizer::from_json: ";
  const Json j = parse_json_object(json, op);  // any keys: the kind's reader checks them
  const auto kind_it = j.find("kind");
  if (kind_it == j.end()) throw std::invalid_argument(op + "missing \"kind\" in " + json);
  if (!kind_it->is_string()) throw std::invalid_argument(op + "\"kind\" must be a string, got " + kind_it->dump());
  const std::string kind = kind_it->get<std::string>();
  TokenizerReader reader;
  {
    const std::lock_guard<std::mutex> lock(readers_mutex());
    const auto it = readers().find(kind);
    if (it != readers().end()) reader = it->second;
  }
  if (!reader) {
    std::string known;
    for (const std::string& n : tokenizer_kind_names()) known += (known.empty() ? "\"" : ", \"") + n + "\"";
    throw std::invalid_argument(op + "unknown \"kind\" \"" + kind + "\" (the known kinds: " + known + ")");
  }
  std::shared_ptr<const TokenizerKind> read = reader(json);
  if (!read || read->name() != kind) {
    throw std::invalid_argument(op + "the reader of \"" + kind + "\" gave " + (read ? "a \"" + std::string(read->name()) + "\" tokenizer" : "nothing"));
  }
  return Tokenizer(std::move(read));
}

std::string Tokenizer::decode(int64_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::invalid_argument("Tokenizer::decode: id " + std::to_string(id) + " is outside [0, " +
                                std::to_string(vocab_size()) + ") of the " + kind_name() + " tokenizer");
  }
  return kind_->token(id);
}

std::vector<int64_t> Tokenizer::token_bytes() const {
  // A merged token stands for the bytes of its pieces; a special for its text.
  std::vector<int64_t> lengths(static_cast<size_t>(vocab_size()));
  for (int64_t id = 0; id < vocab_size(); ++id) lengths[static_cast<size_t>(id)] = static_cast<int64_t>(kind_->token(id).size());
  return lengths;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int64_t id : ids) text += decode(id);
  return text;
}

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
}  // namespace

std::string Utf8Printer::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const CodePoint c = decode_utf8(pending_, pos);
    if (c.length > 0) {
      out.append(pending_, pos, c.length);
      pos += c.length;
    } else if (c.problem != nullptr && std::string_view(c.problem) == "a sequence truncated by the end of the text") {
      break;  // the rest of this character may come with the next token
    } else {
      out.append(kReplacement);
      ++pos;
    }
  }
  pending_.erase(0, pos);
  return out;
}

std::string Utf8Printer::finish() {
  std::string out;
  for (size_t i = 0; i < pending_.size(); ++i) out.append(kReplacement);
  pending_.clear();
  return out;
}

}  // namespace ag
