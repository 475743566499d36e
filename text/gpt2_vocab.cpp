// GPT-2's vocabulary from the two files OpenAI published with it (bpe.h): encoder.json maps each
// token, written with GPT-2's byte-to-unicode characters, to its id; vocab.bpe lists the merges
// in rank order, one "left right" pair a line after a "#version" line. The files are not part
// of this repository: text/fetch_gpt2_vocab.sh copies them into the cache folder.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "attograd/text/bpe.h"
#include "attograd/text/bpe_tables.h"
#include "attograd/text/utf8.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

// GPT-2's 50,000 merges and one special, <|endoftext|>.
constexpr size_t kGPT2Merges = 50000;

std::string read_vocab_file(const std::string& path) {
  try {
    return read_file(path);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("GPT-2's vocabulary: ") + e.what() + "; run " + kFetchGPT2Command +
                                " to fetch it");
  }
}

// The bytes a token of GPT-2's files stands for: each character is one byte, through the
// byte-to-unicode table (character -> byte). Empty when a character is not in the table.
std::string token_bytes_of(const std::string& text, const std::vector<int>& byte_of_char) {
  std::string bytes;
  for (size_t pos = 0; pos < text.size();) {
    const CodePoint cp = decode_utf8(text, pos);
    if (cp.length == 0 || cp.value >= byte_of_char.size() || byte_of_char[cp.value] < 0) return {};
    bytes += static_cast<char>(byte_of_char[cp.value]);
    pos += cp.length;
  }
  return bytes;
}

// The character GPT-2 writes for each byte, inverted: byte_of_char[code point] = byte or -1. A
// byte that prints as itself is its own character; the others, in byte order, are U+0100,
// U+0101, ...
std::vector<int> byte_of_char_table() {
  std::vector<int> table(512, -1);
  int moved = 0;
  for (int b = 0; b < 256; ++b) table[static_cast<size_t>(gpt2_prints_as_itself(b) ? b : 256 + moved++)] = b;
  return table;
}

}  // namespace

std::string gpt2_vocab_dir() {
  namespace fs = std::filesystem;
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : std::string();
  };
  if (!env("ATTOGRAD_CACHE").empty()) return (fs::path(env("ATTOGRAD_CACHE")) / "gpt2").string();
  if (!env("XDG_CACHE_HOME").empty()) return (fs::path(env("XDG_CACHE_HOME")) / "attograd" / "gpt2").string();
  if (!env("HOME").empty()) return (fs::path(env("HOME")) / ".cache" / "attograd" / "gpt2").string();
  throw std::invalid_argument(
      "GPT-2's vocabulary: none of ATTOGRAD_CACHE, XDG_CACHE_HOME or HOME is set, so there is no cache folder to look in");
}

BytePairEncoding BytePairEncoding::gpt2_from_files(const std::string& encoder_json, const std::string& vocab_bpe) {
  const std::string enc_name = "'" + encoder_json + "'", bpe_name = "'" + vocab_bpe + "'";
  const std::string enc_text = read_vocab_file(encoder_json), bpe_text = read_vocab_file(vocab_bpe);
  Json encoder;
  try {
    encoder = parse_json(enc_text);
  } catch (const std::exception& e) {
    throw std::invalid_argument("GPT-2's vocabulary: " + enc_name + " is not valid JSON (truncated?): " + e.what());
  }
  if (!encoder.is_object()) throw std::invalid_argument("GPT-2's vocabulary: " + enc_name + " is not a JSON object");
  // Token bytes -> id, from encoder.json.
  const std::vector<int> byte_of_char = byte_of_char_table();
  std::unordered_map<std::string, int64_t> id_of;
  for (const auto& [token, id] : encoder.items()) {
    const auto value = json_int64(id);
    const std::string bytes = token == kEndOfText ? token : token_bytes_of(token, byte_of_char);
    if (!value || bytes.empty()) {
      throw std::invalid_argument("GPT-2's vocabulary: " + enc_name + ": entry \"" + token + "\": " + id.dump() +
                                  " is not a token of GPT-2's byte alphabet with an integer id");
    }
    id_of[bytes] = *value;
  }
  const std::vector<unsigned char> order = gpt2_byte_order();
  for (int id = 0; id < 256; ++id) {
    const auto it = id_of.find(std::string(1, static_cast<char>(order[static_cast<size_t>(id)])));
    if (it == id_of.end() || it->second != id) {
      throw std::invalid_argument("GPT-2's vocabulary: " + enc_name + " does not number the 256 bytes as GPT-2 does (id " +
                                  std::to_string(id) + ")");
    }
  }
  // The merges, each checked against encoder.json: its tokens known, its result the next id.
  std::vector<BPEMerge> merges;
  merges.reserve(kGPT2Merges);
  size_t line_no = 0, pos = 0;
  while (pos < bpe_text.size()) {
    size_t end = bpe_text.find('\n', pos);
    if (end == std::string::npos) end = bpe_text.size();
    const std::string line = bpe_text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    const std::string where = "GPT-2's vocabulary: " + bpe_name + " line " + std::to_string(line_no) + " \"" + line + "\"";
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      throw std::invalid_argument(where + ": a merge is two tokens separated by one space");
    }
    const std::string left = token_bytes_of(line.substr(0, space), byte_of_char);
    const std::string right = token_bytes_of(line.substr(space + 1), byte_of_char);
    const auto l = id_of.find(left), r = id_of.find(right), m = id_of.find(left + right);
    if (left.empty() || right.empty() || l == id_of.end() || r == id_of.end()) {
      throw std::invalid_argument(where + ": names a token that is not in " + enc_name);
    }
    const int64_t expected = 256 + static_cast<int64_t>(merges.size());
    if (m == id_of.end() || m->second != expected) {
      throw std::invalid_argument(where + ": the merged token should be id " + std::to_string(expected) + " in " + enc_name +
                                  (m == id_of.end() ? ", which does not have it" : ", which gives it id " +
                                                                                       std::to_string(m->second)));
    }
    merges.push_back({static_cast<int32_t>(l->second), static_cast<int32_t>(r->second)});
  }
  // 256 bytes + the merges + <|endoftext|>: anything else means one file was cut short.
  const auto eot = id_of.find(kEndOfText);
  const int64_t eot_id = 256 + static_cast<int64_t>(merges.size());
  if (merges.size() != kGPT2Merges || encoder.size() != kGPT2Merges + 257 || eot == id_of.end() || eot->second != eot_id) {
    throw std::invalid_argument("GPT-2's vocabulary: " + bpe_name + " has " + std::to_string(merges.size()) +
                                " merges and " + enc_name + " " + std::to_string(encoder.size()) +
                                " tokens, where GPT-2 has 50000 merges and 50257 tokens ending with <|endoftext|> = 50256 "
                                "(is a file truncated? run " + kFetchGPT2Command + " again)");
  }
  return BytePairEncoding(kGPT2Pattern, ByteOrder::gpt2, std::move(merges), {kEndOfText}, "GPT-2's vocabulary");
}

BytePairEncoding BytePairEncoding::gpt2() {
  namespace fs = std::filesystem;
  const fs::path dir = gpt2_vocab_dir();
  const std::string encoder = (dir / "encoder.json").string(), vocab = (dir / "vocab.bpe").string();
  for (const std::string& f : {encoder, vocab}) {
    std::error_code ec;
    if (!fs::exists(f, ec)) {
      throw std::invalid_argument("GPT-2's vocabulary: '" + f + "' does not exist; run " + kFetchGPT2Command +
                                  " (from the attograd source tree) to copy encoder.json and vocab.bpe into '" +
                                  dir.string() + "'");
    }
  }
  // Reading and checking the files takes a fraction of a second: once per process and folder.
  static std::mutex mutex;
  static std::map<std::string, BytePairEncoding> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = loaded.find(dir.string());
  if (it != loaded.end()) return it->second;
  BytePairEncoding bpe = gpt2_from_files(encoder, vocab);
  loaded.emplace(dir.string(), bpe);
  return bpe;
}

}  // namespace ag
