// Hugging Face's tokenizer.json for byte-level BPE (hf_tokenizer.h): reading and checking every
// field this project uses and refusing the rest by name (hf_tokenizer_write.cpp writes one). The
// encoding itself is hf_bpe.cpp's.
//
// The format (Hugging Face's `tokenizers`): "model" holds "vocab" (token text -> id) and "merges"
// in rank order; a token's text is its bytes written one character per byte with GPT-2's
// byte-to-unicode table (a space is "Ġ"); "added_tokens" are tokens matched in the raw text, with
// ids beside or inside the vocabulary.
#include "attograd/text/hf_tokenizer.h"

#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "attograd/text/bpe_tables.h"
#include "attograd/text/hf_bpe.h"
#include "attograd/text/utf8.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

// GPT-2's byte-to-unicode table: a byte that prints as itself is its own character, the others,
// in byte order, are U+0100, U+0101, ...
std::vector<uint32_t> char_of_byte() {
  std::vector<uint32_t> table(256);
  uint32_t moved = 0;
  for (int b = 0; b < 256; ++b) table[static_cast<size_t>(b)] = gpt2_prints_as_itself(b) ? static_cast<uint32_t>(b) : 256 + moved++;
  return table;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {  // the table's characters are below U+0800
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}


// The bytes a token's text stands for; false when a character is outside the table.
bool byte_level_bytes(const std::string& text, std::string& bytes) {
  static const std::vector<int> byte_of = [] {
    std::vector<int> inverse(512, -1);
    const std::vector<uint32_t> table = char_of_byte();
    for (int b = 0; b < 256; ++b) inverse[table[static_cast<size_t>(b)]] = b;
    return inverse;
  }();
  bytes.clear();
  for (size_t pos = 0; pos < text.size();) {
    const CodePoint cp = decode_utf8(text, pos);
    if (cp.length == 0 || cp.value >= byte_of.size() || byte_of[cp.value] < 0) return false;
    bytes += static_cast<char>(byte_of[cp.value]);
    pos += cp.length;
  }
  return !bytes.empty();
}

// Reads one file's fields, each error starting with the file's name.
class Reader {
 public:
  Reader(const Json& root, std::string source) : root_(root), where_(std::move(source) + ": ") {}

  HFByteLevelBPE read() {
    HFByteLevelBPE spec;
    const Json& model = object_at(root_, "model", "model");
    const std::string type = model.contains("type") ? string_at(model, "type", "model.type") : "BPE";
    if (type != "BPE") fail("model.type is \"" + type + "\": only byte-level BPE is supported (not WordPiece, Unigram, WordLevel)");
    if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0) {
      fail("model.dropout is " + model["dropout"].dump() + ": BPE dropout (random merges) is not supported");
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (model.contains(key) && !model[key].is_null() && model[key] != "") {
        fail(std::string("model.") + key + " is " + model[key].dump() + ": not supported with byte-level BPE");
      }
    }
    spec.ignore_merges = flag(model, "ignore_merges", "model.ignore_merges");
    spec.byte_fallback = flag(model, "byte_fallback", "model.byte_fallback");
    read_vocab(object_at(model, "vocab", "model.vocab"), spec);
    read_added(spec);
    read_merges(model, spec);
    read_normalizer(spec);
    read_pre_tokenizer(spec);
    const Json* decoder = root_.contains("decoder") ? &root_["decoder"] : nullptr;
    if (decoder == nullptr || !decoder->is_object() || decoder->value("type", "") != "ByteLevel") {
      fail("decoder is " + (decoder ? decoder->dump().substr(0, 200) : std::string("missing")) +
           ": a byte-level BPE decodes with the ByteLevel decoder");
    }
    return spec;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw std::invalid_argument(where_ + what); }

  const Json& object_at(const Json& j, const char* key, const std::string& field) const {
    const auto it = j.find(key);
    if (it == j.end()) fail("missing \"" + field + "\"");
    if (!it->is_object()) fail("\"" + field + "\" must be an object, got " + json_type_name(*it));
    return *it;
  }
  std::string string_at(const Json& j, const char* key, const std::string& field) const {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) fail("\"" + field + "\" must be a string");
    return it->get<std::string>();
  }
  bool flag(const Json& j, const char* key, const std::string& field) const {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return false;
    if (!it->is_boolean()) fail("\"" + field + "\" must be true or false, got " + it->dump());
    return it->get<bool>();
  }

  void place(HFByteLevelBPE& spec, int64_t id, std::string bytes, bool in_model, const std::string& what) {
    if (id < 0 || id >= (int64_t{1} << 24)) fail(what + " has id " + std::to_string(id) + ", outside [0, 2^24)");
    if (static_cast<size_t>(id) >= spec.tokens.size()) {
      spec.tokens.resize(static_cast<size_t>(id) + 1);
      spec.in_model.resize(static_cast<size_t>(id) + 1, false);
      taken_.resize(static_cast<size_t>(id) + 1, false);
    }
    if (taken_[static_cast<size_t>(id)]) {
      // An added token may repeat a vocabulary entry (GPT-2's <|endoftext|>), with the same text.
      if (in_model || spec.tokens[static_cast<size_t>(id)] != bytes) {
        fail(what + " has id " + std::to_string(id) + ", which is taken by \"" + byte_level_text(spec.tokens[static_cast<size_t>(id)]) + "\"");
      }
      return;
    }
    taken_[static_cast<size_t>(id)] = true;
    spec.tokens[static_cast<size_t>(id)] = std::move(bytes);
    spec.in_model[static_cast<size_t>(id)] = in_model;
  }

  void read_vocab(const Json& vocab, HFByteLevelBPE& spec) {
    if (vocab.empty()) fail("\"model.vocab\" is empty");
    std::string bytes;
    for (const auto& [text, id] : vocab.items()) {
      const std::string what = "model.vocab token \"" + text + "\"";
      const auto value = json_int64(id);
      if (!value) fail(what + " must have an integer id, got " + id.dump());
      if (!byte_level_bytes(text, bytes)) fail(what + " is not written in the byte-level alphabet (is this a byte-level BPE?)");
      place(spec, *value, bytes, true, what);
      id_of_[text] = static_cast<int32_t>(*value);
    }
    for (int b = 0; b < 256; ++b) {
      if (!id_of_.contains(byte_level_text(std::string(1, static_cast<char>(b))))) {
        fail("model.vocab has no token for the byte " + std::to_string(b) + " (\"" +
             byte_level_text(std::string(1, static_cast<char>(b))) + "\"): a byte-level BPE has all 256");
      }
    }
  }

  void read_added(HFByteLevelBPE& spec) {
    const auto it = root_.find("added_tokens");
    if (it == root_.end() || it->is_null()) return;
    if (!it->is_array()) fail("\"added_tokens\" must be an array");
    const bool has_normalizer = root_.contains("normalizer") && !root_["normalizer"].is_null();
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& t = (*it)[i];
      const std::string what = "added_tokens[" + std::to_string(i) + "]";
      if (!t.is_object()) fail(what + " must be an object");
      HFAddedToken a;
      a.content = string_at(t, "content", what + ".content");
      if (a.content.empty()) fail(what + ".content is empty");
      const auto id = t.contains("id") ? json_int64(t["id"]) : std::nullopt;
      if (!id) fail(what + " (\"" + a.content + "\") needs an integer \"id\"");
      a.id = static_cast<int32_t>(*id);
      a.special = flag(t, "special", what + ".special");
      a.lstrip = flag(t, "lstrip", what + ".lstrip");
      a.rstrip = flag(t, "rstrip", what + ".rstrip");
      a.normalized = flag(t, "normalized", what + ".normalized");
      if (flag(t, "single_word", what + ".single_word")) fail(what + " (\"" + a.content + "\"): single_word is not supported");
      if (a.normalized && has_normalizer) {
        fail(what + " (\"" + a.content + "\"): normalized: true with a normalizer is not supported");
      }
      for (const HFAddedToken& b : spec.added) {
        if (b.content == a.content) fail(what + " (\"" + a.content + "\") appears twice, as ids " + std::to_string(b.id) + " and " + std::to_string(a.id));
      }
      place(spec, a.id, a.content, false, what + " (\"" + a.content + "\")");
      spec.added.push_back(std::move(a));
    }
  }

  void read_merges(const Json& model, HFByteLevelBPE& spec) {
    const auto it = model.find("merges");
    if (it == model.end() || !it->is_array()) fail("\"model.merges\" must be an array");
    spec.merges.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& m = (*it)[i];
      const std::string what = "model.merges[" + std::to_string(i) + "] " + m.dump();
      std::string left, right;
      if (m.is_string()) {  // "a b": the older form
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) fail(what + " must be two tokens separated by one space");
        left = s.substr(0, space);
        right = s.substr(space + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["a", "b"]
        left = m[0].get<std::string>();
        right = m[1].get<std::string>();
      } else {
        fail(what + " must be \"a b\" or [\"a\", \"b\"]");
      }
      const auto l = id_of_.find(left), r = id_of_.find(right), merged = id_of_.find(left + right);
      if (l == id_of_.end() || r == id_of_.end()) fail(what + " names a token that is not in model.vocab");
      if (merged == id_of_.end()) fail(what + " makes \"" + left + right + "\", which is not in model.vocab");
      spec.merges.push_back({l->second, r->second, merged->second});
    }
  }

  void read_normalizer(HFByteLevelBPE& spec) {
    const auto it = root_.find("normalizer");
    if (it == root_.end() || it->is_null()) return;
    const std::string type = it->is_object() ? it->value("type", "") : "";
    if (type != "NFC") fail("normalizer " + it->dump().substr(0, 200) + " is not supported (only none or NFC)");
    spec.nfc = true;
  }

  void byte_level(const Json& p, bool want_regex, const std::string& field) const {
    if (flag(p, "add_prefix_space", field + ".add_prefix_space")) fail(field + ".add_prefix_space true is not supported");
    const bool use_regex = !p.contains("use_regex") || flag(p, "use_regex", field + ".use_regex");
    if (use_regex != want_regex) {
      fail(field + ".use_regex is " + (use_regex ? "true" : "false") + ": supported are a ByteLevel alone with use_regex true, or a Split followed by a ByteLevel with use_regex false");
    }
  }

  void read_pre_tokenizer(HFByteLevelBPE& spec) const {
    const auto it = root_.find("pre_tokenizer");
    if (it == root_.end() || !it->is_object()) fail("\"pre_tokenizer\" must be an object (a byte-level BPE has a ByteLevel one)");
    const Json& p = *it;
    const std::string type = p.value("type", "");
    if (type == "ByteLevel") {
      byte_level(p, true, "pre_tokenizer");
      spec.pattern = kGPT2Pattern;
      return;
    }
    const Json* parts = p.contains("pretokenizers") ? &p["pretokenizers"] : nullptr;
    if (type != "Sequence" || parts == nullptr || !parts->is_array() || parts->size() != 2 || !(*parts)[0].is_object() ||
        !(*parts)[1].is_object() || (*parts)[0].value("type", "") != "Split" || (*parts)[1].value("type", "") != "ByteLevel") {
      fail("pre_tokenizer " + p.dump().substr(0, 300) + " is not supported (a ByteLevel, or a Sequence of a Split and a ByteLevel)");
    }
    const Json& split = (*parts)[0];
    const std::string field = "pre_tokenizer.pretokenizers[0]";
    if (split.value("behavior", "") != "Isolated") fail(field + ".behavior is " + split.value("behavior", Json("missing")).dump() + ": only Isolated is supported");
    if (flag(split, "invert", field + ".invert")) fail(field + ".invert true is not supported");
    const Json pattern = split.value("pattern", Json());
    if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
      fail(field + ".pattern must be {\"Regex\": ...}, got " + pattern.dump().substr(0, 200));
    }
    spec.pattern = pattern["Regex"].get<std::string>();
    byte_level((*parts)[1], false, "pre_tokenizer.pretokenizers[1]");
  }

  const Json& root_;
  std::string where_;
  std::vector<bool> taken_;
  std::unordered_map<std::string, int32_t> id_of_;  // model.vocab: token text -> id
};

Json parse(const std::string& json, const std::string& source) {
  try {
    return parse_json(json);
  } catch (const std::exception& e) {
    throw std::invalid_argument(source + ": is not valid JSON: " + e.what());
  }
}

HFByteLevelBPE read_spec(const Json& root, const std::string& source) {
  if (!root.is_object()) throw std::invalid_argument(source + ": is not a JSON object, so not a tokenizer.json");
  HFByteLevelBPE spec = Reader(root, source).read();
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.tokens[id].empty()) {
      throw std::invalid_argument(source + ": no token has id " + std::to_string(id) + " (the ids must be 0.." +
                                  std::to_string(spec.tokens.size() - 1) + " without a gap)");
    }
  }
  return spec;
}

}  // namespace

std::string byte_level_text(const std::string& bytes) {
  static const std::vector<uint32_t> table = char_of_byte();
  std::string text;
  for (char c : bytes) append_utf8(text, table[static_cast<unsigned char>(c)]);
  return text;
}

std::shared_ptr<const TokenizerKind> read_hf_bpe_kind(const std::string& json, const std::string& source) {
  return make_hf_bpe_kind(read_spec(parse(json, source), source), source);
}

Tokenizer hf_tokenizer_from_json(const std::string& json, const std::string& source) {
  return Tokenizer(read_hf_bpe_kind(json, source));
}

Tokenizer read_hf_tokenizer(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("tokenizer.json: ") + e.what());
  }
  return hf_tokenizer_from_json(text, "'" + path + "'");
}

Tokenizer load_tokenizer(const std::string& name_or_path) {
  if (name_or_path == "gpt2") return Tokenizer::bpe(BytePairEncoding::gpt2());
  if (name_or_path == "byte") return Tokenizer::bytes();
  std::string text;
  try {
    text = read_file(name_or_path);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("tokenizer: ") + e.what());
  }
  if (text.empty()) throw std::invalid_argument("'" + name_or_path + "' is empty, not a tokenizer file");
  // A tokenizer.json has a "model"; train_bpe's files (and the descriptions) do not.
  const std::string source = "'" + name_or_path + "'";
  const Json root = parse(text, source);
  if (root.is_object() && root.contains("model")) return Tokenizer(make_hf_bpe_kind(read_spec(root, source), source));
  return Tokenizer::bpe(BytePairEncoding::from_json(text, source));
}

}  // namespace ag
