// The tokenizers of train/data/text.h: character-level (UTF-8 code points, validated strictly) and
// byte-level, and their JSON description for checkpoints.
#include "attograd/train/data/text.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/core/parallel.h"
#include "attograd/core/threads.h"
#include "attograd/train/data/bpe.h"
#include "attograd/train/data/utf8.h"
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
// Tokenizer

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
  Tokenizer t;
  t.kind_ = Kind::characters;
  for (uint32_t c = 0; c < 128; ++c) {
    if (seen[c]) t.symbols_.push_back(std::string(1, static_cast<char>(c)));
  }
  // std::string compares bytes as unsigned char, so this is byte order, which for UTF-8 is also
  // code point order; every multi-byte character sorts after all of ASCII.
  std::sort(others.begin(), others.end());
  t.symbols_.insert(t.symbols_.end(), others.begin(), others.end());
  return t;
}

Tokenizer Tokenizer::bytes() { return Tokenizer(); }

Tokenizer Tokenizer::bpe(const BytePairEncoding& encoding) {
  Tokenizer t;
  t.kind_ = Kind::bpe;
  t.bpe_ = std::make_shared<const BytePairEncoding>(encoding);
  return t;
}

const BytePairEncoding& Tokenizer::byte_pairs() const {
  if (kind_ != Kind::bpe) throw std::logic_error(std::string("Tokenizer::byte_pairs: a ") + kind_name() + " tokenizer has no byte pairs");
  return *bpe_;
}

const char* Tokenizer::kind_name() const {
  switch (kind_) {
    case Kind::characters: return "char";
    case Kind::bytes: return "byte";
    case Kind::bpe: return "bpe";
  }
  return "?";
}

int64_t Tokenizer::vocab_size() const {
  switch (kind_) {
    case Kind::characters: return static_cast<int64_t>(symbols_.size());
    case Kind::bytes: return 256;
    case Kind::bpe: return bpe_->vocab_size();
  }
  return 0;
}

std::string Tokenizer::to_json() const {
  if (kind_ == Kind::bpe) return bpe_->to_json();
  OrderedJson j = {{"kind", kind_name()}};
  // The symbols as JSON strings: the UTF-8 itself, so the description stays readable in a
  // checkpoint's metadata; JSON escapes the control characters.
  if (kind_ == Kind::characters) j["symbols"] = symbols_;
  return j.dump();
}

std::string describe_tokenizer(const Tokenizer& tokenizer) {
  std::string out = std::string(tokenizer.kind_name()) + " tokenizer of " + std::to_string(tokenizer.vocab_size()) + " ids";
  if (tokenizer.kind() == Tokenizer::Kind::bytes) return out;
  if (tokenizer.kind() == Tokenizer::Kind::bpe && tokenizer.byte_pairs().byte_order() == ByteOrder::gpt2) {
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
  // The byte-pair encoding's own fields are known here too, so that its kind can be read
  // first; the other kinds refuse them below.
  const std::vector<std::string_view> bpe_fields = {"pattern", "byte_order", "specials", "merges"};
  const Json j = parse_options_object(json, {"kind", "symbols", "pattern", "byte_order", "specials", "merges"}, op);
  const auto kind_it = j.find("kind");
  if (kind_it == j.end()) throw std::invalid_argument(op + "missing \"kind\" in " + json);
  if (!kind_it->is_string()) throw std::invalid_argument(op + "\"kind\" must be a string, got " + kind_it->dump());
  const std::string kind = kind_it->get<std::string>();
  if (kind == "bpe") return bpe(BytePairEncoding::from_json(json, "Tokenizer::from_json"));
  for (std::string_view field : bpe_fields) {
    if (j.contains(field)) throw std::invalid_argument(op + "unknown field \"" + std::string(field) + "\" in a " + kind + " tokenizer");
  }
  const auto symbols_it = j.find("symbols");
  if (kind == "byte") {
    if (symbols_it != j.end()) throw std::invalid_argument(op + "a byte tokenizer has no \"symbols\" (its vocabulary is the 256 bytes)");
    return bytes();
  }
  if (kind != "char") throw std::invalid_argument(op + "unknown \"kind\" \"" + kind + "\" (expected \"char\", \"byte\" or \"bpe\")");
  if (symbols_it == j.end()) throw std::invalid_argument(op + "a char tokenizer needs \"symbols\"");
  if (!symbols_it->is_array()) {
    throw std::invalid_argument(op + "\"symbols\" must be an array of strings, got " + json_type_name(*symbols_it));
  }
  if (symbols_it->empty()) throw std::invalid_argument(op + "\"symbols\" is empty");
  Tokenizer t;
  t.kind_ = Kind::characters;
  for (size_t i = 0; i < symbols_it->size(); ++i) {
    const Json& s = (*symbols_it)[i];
    const std::string where = "symbol " + std::to_string(i);
    if (!s.is_string()) throw std::invalid_argument(op + where + " must be a string, got " + s.dump());
    std::string symbol = s.get<std::string>();
    const CodePoint cp = symbol.empty() ? CodePoint{} : decode_utf8(symbol, 0);
    if (cp.length == 0 || cp.length != symbol.size()) {
      throw std::invalid_argument(op + where + " must be exactly one UTF-8 character, got " + s.dump());
    }
    if (!t.symbols_.empty()) {
      // Ids are positions in the sorted list: a duplicate or an unsorted list is not what
      // characters() wrote and would silently map text to other ids.
      if (symbol == t.symbols_.back()) throw std::invalid_argument(op + where + " " + s.dump() + " appears twice");
      if (symbol < t.symbols_.back()) {
        throw std::invalid_argument(op + where + " " + s.dump() + " is out of order (the symbols are sorted by their bytes)");
      }
    }
    t.symbols_.push_back(std::move(symbol));
  }
  return t;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  if (kind_ == Kind::bpe) return bpe_->encode(text, in_parallel_region() ? 1 : num_threads());
  std::vector<int64_t> ids;
  if (kind_ == Kind::bytes) {
    ids.reserve(text.size());
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }
  const std::string op = "Tokenizer::encode";
  // Lookup: a table for ASCII, binary search over the sorted symbols for the rest.
  int64_t ascii[128];
  std::fill(std::begin(ascii), std::end(ascii), int64_t{-1});
  for (size_t i = 0; i < symbols_.size() && symbols_[i].size() == 1; ++i) {
    ascii[static_cast<unsigned char>(symbols_[i][0])] = static_cast<int64_t>(i);
  }
  ids.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const CodePoint cp = decode_utf8(text, pos);
    if (cp.length == 0) throw_invalid_utf8(op, text, pos, cp.problem);
    int64_t id = -1;
    if (cp.value < 128) {
      id = ascii[cp.value];
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

std::string Tokenizer::decode(int64_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::invalid_argument("Tokenizer::decode: id " + std::to_string(id) + " is outside [0, " +
                                std::to_string(vocab_size()) + ") of the " + kind_name() + " tokenizer");
  }
  switch (kind_) {
    case Kind::bytes: return std::string(1, static_cast<char>(static_cast<unsigned char>(id)));
    case Kind::characters: return symbols_[static_cast<size_t>(id)];
    case Kind::bpe: return bpe_->token_bytes(id);
  }
  return {};
}

std::vector<int64_t> Tokenizer::token_bytes() const {
  switch (kind_) {
    case Kind::characters: {
      std::vector<int64_t> lengths;
      lengths.reserve(symbols_.size());
      for (const std::string& s : symbols_) lengths.push_back(static_cast<int64_t>(s.size()));
      return lengths;
    }
    case Kind::bytes: return std::vector<int64_t>(256, 1);
    case Kind::bpe: {  // a merged token stands for the bytes of its pieces; a special for its text
      std::vector<int64_t> lengths(static_cast<size_t>(bpe_->vocab_size()));
      for (int64_t id = 0; id < bpe_->vocab_size(); ++id) {
        lengths[static_cast<size_t>(id)] = static_cast<int64_t>(bpe_->token_bytes(id).size());
      }
      return lengths;
    }
  }
  return {};
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
