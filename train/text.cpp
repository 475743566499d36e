#include "attograd/train/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "attograd/core/rng.h"
#include "attograd/train/atomic_file.h"
#include "attograd/train/json_text.h"

namespace ag {

namespace {

// ---------------------------------------------------------------------------------------------
// Corpus

// The text with every line that is exactly "%" (the fortune separator) left out; all other
// bytes, newlines included, are kept as they are.
std::string drop_separator_lines(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t newline = text.find('\n', begin);
    const size_t end = newline == std::string::npos ? text.size() : newline + 1;
    const size_t content_end = newline == std::string::npos ? text.size() : newline;
    const bool separator = content_end - begin == 1 && text[begin] == '%';
    if (!separator) out.append(text, begin, end - begin);
    begin = end;
  }
  return out;
}

std::string read_fortunes() {
  namespace fs = std::filesystem;
  const std::string dir = kFortunesDir;
  const std::string hint = " (install Debian's fortune files with `apt-get install fortunes`, or give a text file)";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::invalid_argument("read_corpus: no fortunes directory '" + dir + "'" + hint);
  std::vector<std::string> files;
  fs::directory_iterator it(dir, ec);
  if (ec) throw std::invalid_argument("read_corpus: cannot list '" + dir + "': " + ec.message() + hint);
  for (const fs::directory_entry& entry : it) {
    // symlink_status, not status: the *.u8 names are symlinks to the plain files, and following
    // them would read every fortune twice.
    const fs::file_status st = entry.symlink_status(ec);
    if (ec || !fs::is_regular_file(st)) continue;
    const std::string name = entry.path().filename().string();
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".dat") == 0) continue;  // strfile's binary index
    files.push_back(entry.path().string());
  }
  // Directory order is whatever the file system gives; sorting makes the corpus (and so the
  // vocabulary and every batch) the same on every machine.
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::invalid_argument("read_corpus: no fortune files in '" + dir + "'" + hint);
  std::string text;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0) text += '\n';
    try {
      text += drop_separator_lines(read_file(files[i]));
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(std::string("read_corpus: ") + e.what());
    }
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// UTF-8

struct CodePoint {
  uint32_t value = 0;
  size_t length = 0;  // bytes; 0 when the sequence is invalid
  const char* problem = nullptr;
};

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

// Decodes the code point at text[pos] strictly (RFC 3629): no overlong forms, no surrogates,
// nothing above U+10FFFF, no missing continuation bytes.
CodePoint decode_utf8(const std::string& text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return {.value = lead, .length = 1, .problem = nullptr};
  size_t length = 0;
  uint32_t value = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead < 0xC2) {
    return {.value = 0, .length = 0,
            .problem = lead < 0xC0 ? "a continuation byte where a character should start" : "an overlong encoding"};
  } else if (lead < 0xE0) {
    length = 2;
    value = lead & 0x1Fu;
  } else if (lead < 0xF0) {
    length = 3;
    value = lead & 0x0Fu;
    if (lead == 0xE0) low = 0xA0;   // below: overlong
    if (lead == 0xED) high = 0x9F;  // above: a UTF-16 surrogate
  } else if (lead < 0xF5) {
    length = 4;
    value = lead & 0x07u;
    if (lead == 0xF0) low = 0x90;   // below: overlong
    if (lead == 0xF4) high = 0x8F;  // above: beyond U+10FFFF
  } else {
    return {.value = 0, .length = 0, .problem = "a byte that never occurs in UTF-8"};
  }
  for (size_t k = 1; k < length; ++k) {
    if (pos + k >= text.size()) return {.value = 0, .length = 0, .problem = "a sequence truncated by the end of the text"};
    const unsigned char c = byte(pos + k);
    if (c < 0x80 || c > 0xBF) return {.value = 0, .length = 0, .problem = "a sequence missing continuation bytes"};
    if (k == 1 && (c < low || c > high)) {
      const char* why = lead == 0xED ? "a UTF-16 surrogate" : lead == 0xF4 ? "a code point above U+10FFFF" : "an overlong encoding";
      return {.value = 0, .length = 0, .problem = why};
    }
    value = (value << 6) | (c & 0x3Fu);
  }
  return {.value = value, .length = length, .problem = nullptr};
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

// ---------------------------------------------------------------------------------------------
// Batches

__extension__ typedef unsigned __int128 Uint128;

// floor(a * b / c) without overflow, for c > 0 and a <= c (so the result fits).
uint64_t scale(uint64_t a, uint64_t b, uint64_t c) {
  return static_cast<uint64_t>(static_cast<Uint128>(a) * b / c);
}

// The stream call number of the batch windows: far beyond the few calls a model's step makes
// (each dropout, each initialiser), so the windows are independent of the model's own random
// draws even when the trainer uses the same seed and step.
constexpr uint64_t kBatchCall = uint64_t{1} << 62;

void check_batch_options(const std::string& op, const std::vector<int64_t>& tokens, const TextBatchOptions& o) {
  if (o.batch < 1) throw std::invalid_argument(op + ": batch must be >= 1, got " + std::to_string(o.batch));
  if (o.block_size < 1) throw std::invalid_argument(op + ": block_size must be >= 1, got " + std::to_string(o.block_size));
  const uint64_t n = tokens.size();
  if (n < static_cast<uint64_t>(o.block_size) + 1) {
    throw std::invalid_argument(op + ": the text has " + std::to_string(n) + " tokens but a window needs block_size + 1 = " +
                                std::to_string(o.block_size + 1) +
                                " (the text is too short for the context: lower --block-size or give more text)");
  }
}

// Copies the window starting at `start` into row `row` of the inputs and targets.
void fill_row(const std::vector<int64_t>& tokens, int64_t block, uint64_t start, int64_t row, TextBatch& out) {
  const auto src = tokens.begin() + static_cast<std::ptrdiff_t>(start);
  const auto dst = static_cast<std::ptrdiff_t>(row * block);
  std::copy(src, src + block, out.inputs.data.begin() + dst);
  std::copy(src + 1, src + 1 + block, out.targets.data.begin() + dst);
}

TextBatch empty_batch(int64_t rows, int64_t block) {
  const std::vector<int64_t> zeros(static_cast<size_t>(rows * block), 0);
  return TextBatch{.inputs = Indices(Shape{rows, block}, zeros), .targets = Indices(Shape{rows, block}, zeros)};
}

}  // namespace

std::string read_corpus(const std::string& path) {
  if (path.empty()) return read_fortunes();
  std::string text;
  try {
    // read_file refuses directories, FIFOs and devices and names the path and the reason.
    text = read_file(path);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("read_corpus: ") + e.what());
  }
  if (text.empty()) throw std::invalid_argument("read_corpus: '" + path + "' is empty; a language model needs text to learn from");
  return text;
}

// ---------------------------------------------------------------------------------------------
// Tokenizer

Tokenizer Tokenizer::characters(const std::string& text) {
  const std::string op = "Tokenizer::characters";
  if (text.empty()) throw std::invalid_argument(op + ": the text is empty");
  // Seen code points, ASCII in a table (most of any corpus), the rest collected and deduplicated.
  bool ascii[128] = {};
  std::vector<std::string> others;
  for (size_t pos = 0; pos < text.size();) {
    const CodePoint cp = decode_utf8(text, pos);
    if (cp.length == 0) throw_invalid_utf8(op, text, pos, cp.problem);
    if (cp.value < 128) {
      ascii[cp.value] = true;
    } else {
      others.push_back(text.substr(pos, cp.length));
    }
    pos += cp.length;
    if (others.size() > 4096) {  // keep memory bounded on text with many non-ASCII characters
      std::sort(others.begin(), others.end());
      others.erase(std::unique(others.begin(), others.end()), others.end());
    }
  }
  Tokenizer t;
  t.kind_ = Kind::characters;
  for (int c = 0; c < 128; ++c) {
    if (ascii[c]) t.symbols_.push_back(std::string(1, static_cast<char>(c)));
  }
  // std::string compares bytes as unsigned char, so this is byte order, which for UTF-8 is also
  // code point order; every multi-byte character sorts after all of ASCII.
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  t.symbols_.insert(t.symbols_.end(), others.begin(), others.end());
  return t;
}

Tokenizer Tokenizer::bytes() { return Tokenizer(); }

const char* Tokenizer::kind_name() const {
  switch (kind_) {
    case Kind::characters: return "char";
    case Kind::bytes: return "byte";
  }
  return "?";
}

int64_t Tokenizer::vocab_size() const {
  switch (kind_) {
    case Kind::characters: return static_cast<int64_t>(symbols_.size());
    case Kind::bytes: return 256;
  }
  return 0;
}

std::string Tokenizer::to_json() const {
  OrderedJson j = {{"kind", kind_name()}};
  // The symbols as JSON strings: the UTF-8 itself, so the description stays readable in a
  // checkpoint's metadata; JSON escapes the control characters.
  if (kind_ == Kind::characters) j["symbols"] = symbols_;
  return j.dump();
}

Tokenizer Tokenizer::from_json(const std::string& json) {
  const std::string op = "Tokenizer::from_json: ";
  const Json j = parse_options_object(json, {"kind", "symbols"}, op);
  const auto kind_it = j.find("kind");
  if (kind_it == j.end()) throw std::invalid_argument(op + "missing \"kind\" in " + json);
  if (!kind_it->is_string()) throw std::invalid_argument(op + "\"kind\" must be a string, got " + kind_it->dump());
  const std::string kind = kind_it->get<std::string>();
  const auto symbols_it = j.find("symbols");
  if (kind == "byte") {
    if (symbols_it != j.end()) throw std::invalid_argument(op + "a byte tokenizer has no \"symbols\" (its vocabulary is the 256 bytes)");
    return bytes();
  }
  if (kind != "char") throw std::invalid_argument(op + "unknown \"kind\" \"" + kind + "\" (expected \"char\" or \"byte\")");
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
      throw std::invalid_argument(op + ": character " + printable(cp.value, text.substr(pos, cp.length)) + " at byte offset " +
                                  std::to_string(pos) +
                                  " is not in the vocabulary, which holds the characters of the training text (" +
                                  std::to_string(symbols_.size()) + " of them)");
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
  if (kind_ == Kind::bytes) return std::string(1, static_cast<char>(static_cast<unsigned char>(id)));
  return symbols_[static_cast<size_t>(id)];
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int64_t id : ids) text += decode(id);
  return text;
}

// ---------------------------------------------------------------------------------------------
// Split and batches

TextSplit split_tokens(const std::vector<int64_t>& tokens, double train_fraction) {
  if (!(train_fraction > 0.0 && train_fraction < 1.0)) {
    throw std::invalid_argument("split_tokens: train_fraction must be in (0, 1), got " + std::to_string(train_fraction));
  }
  const size_t n = tokens.size();
  const size_t cut = std::min(n, static_cast<size_t>(std::floor(static_cast<double>(n) * train_fraction)));
  const auto mid = tokens.begin() + static_cast<std::ptrdiff_t>(cut);
  return TextSplit{.train = std::vector<int64_t>(tokens.begin(), mid), .val = std::vector<int64_t>(mid, tokens.end())};
}

TextBatch sample_batch(const std::vector<int64_t>& tokens, const TextBatchOptions& options, uint64_t seed, int64_t step) {
  check_batch_options("sample_batch", tokens, options);
  if (step < 0) throw std::invalid_argument("sample_batch: step must be >= 0, got " + std::to_string(step));
  // Starts are uniform in [0, n - block_size - 1]: `range` choices.
  const uint64_t range = tokens.size() - static_cast<uint64_t>(options.block_size);
  Generator gen(seed);
  gen.set_state(GeneratorState{.seed = seed, .step = static_cast<uint64_t>(step), .call = kBatchCall});
  const uint64_t key = gen.next_stream();
  TextBatch out = empty_batch(options.batch, options.block_size);
  for (int64_t b = 0; b < options.batch; ++b) {
    // The high 64 bits of bits * range (Lemire's multiply-shift): uniform up to a bias of
    // range / 2^64, far below anything a corpus size can show, and no division or retry loop,
    // so each start is a pure function of (seed, step, b).
    const uint64_t start = static_cast<uint64_t>((static_cast<Uint128>(Generator::bits(key, static_cast<uint64_t>(b))) * range) >> 64);
    fill_row(tokens, options.block_size, start, b, out);
  }
  return out;
}

std::vector<TextBatch> eval_batches(const std::vector<int64_t>& tokens, const TextBatchOptions& options, int64_t max_windows) {
  check_batch_options("eval_batches", tokens, options);
  if (max_windows < 1) throw std::invalid_argument("eval_batches: max_windows must be >= 1, got " + std::to_string(max_windows));
  const uint64_t last_start = tokens.size() - static_cast<uint64_t>(options.block_size) - 1;
  uint64_t windows = std::min(static_cast<uint64_t>(max_windows), last_start + 1);
  // Whole batches only when there is text for at least one, so the mean of the batch losses is
  // the mean over all windows; shorter text gives a single, smaller batch.
  const uint64_t batch = static_cast<uint64_t>(options.batch);
  if (windows >= batch) windows -= windows % batch;
  std::vector<TextBatch> out;
  for (uint64_t first = 0; first < windows; first += batch) {
    const uint64_t rows = std::min(batch, windows - first);
    TextBatch b = empty_batch(static_cast<int64_t>(rows), options.block_size);
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t i = first + r;
      // Window i of `windows` starts at floor(i * last_start / (windows - 1)): the first at 0,
      // the last at the end of the text, the rest evenly between.
      const uint64_t start = windows == 1 ? 0 : scale(i, last_start, windows - 1);
      fill_row(tokens, options.block_size, start, static_cast<int64_t>(r), b);
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace ag
