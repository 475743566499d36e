#include "attograd/text/token_shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "attograd/train/io/atomic_file.h"  // FileReader
#include "attograd/train/io/crc32c.h"

namespace ag {

namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

uint32_t load_u32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint64_t load_u64(const unsigned char* p) { return uint64_t{load_u32(p)} | uint64_t{load_u32(p + 4)} << 32; }

// Token i of a little-endian run of `width`-byte tokens.
uint32_t token_at(const unsigned char* p, int width, uint64_t i) {
  return width == 2 ? uint32_t{p[2 * i]} | uint32_t{p[2 * i + 1]} << 8 : load_u32(p + 4 * i);
}

[[noreturn]] void token_too_large(const std::string& path, uint64_t offset, uint32_t token, int64_t vocab) {
  throw std::runtime_error("token shard " + quoted(path) + ": the token at byte offset " + std::to_string(offset) +
                           " is " + std::to_string(token) + ", not below the tokenizer's vocabulary of " +
                           std::to_string(vocab) + " (the shard was made with another tokenizer, or is damaged)");
}

// The first bytes of a file, for a message: hex, and the printable ones as text.
std::string first_bytes(const unsigned char* head, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string hex, text;
  for (size_t i = 0; i < n; ++i) {
    hex += (i > 0 ? " " : "");
    hex += digits[head[i] >> 4];
    hex += digits[head[i] & 15];
    text += head[i] >= 0x20 && head[i] < 0x7f ? static_cast<char>(head[i]) : '.';
  }
  return hex + " (\"" + text + "\")";
}

// CRC-32C of bytes [begin, end) of the file, read in bounded pieces; the tokens among them
// (those wholly inside, counted from the header) checked against vocab.
uint32_t checked_crc(const FileReader& file, const ShardInfo& info, uint64_t begin, uint64_t end, int64_t vocab) {
  std::vector<unsigned char> buf(std::min<uint64_t>(end - begin, 1 << 16));
  uint32_t crc = 0;
  for (uint64_t at = begin; at < end;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), end - at));
    file.read(at, buf.data(), n);
    crc = crc32c(buf.data(), n, crc);
    if (vocab > 0) {
      const uint64_t w = static_cast<uint64_t>(info.token_bytes);
      // The first token boundary at or after `at`, within the token area.
      uint64_t t = std::max(at, info.header_bytes);
      t += (w - (t - info.header_bytes) % w) % w;
      for (; t + w <= at + n; t += w) {
        const uint32_t token = token_at(buf.data() + (t - at), info.token_bytes, 0);
        if (token >= static_cast<uint64_t>(vocab)) token_too_large(info.path, t, token, vocab);
      }
    }
    at += n;
  }
  return crc;
}

// A file with neither magic that is shaped like one of the headers behind its magic (a known
// version and a token count that fits the size exactly) has a damaged magic: raw tokens do not
// line up so by chance. Refused naming the bytes found, rather than trained on as raw uint16.
void refuse_damaged_magic(const FileReader& file, const ShardInfo& info, const unsigned char* head) {
  const std::string where = "token shard '" + info.path + "': ";
  if (info.file_bytes >= kShardHeaderBytes) {
    const uint32_t version = load_u32(head + 8), width = load_u32(head + 12);
    const uint64_t count = load_u64(head + 16);
    // Version 1 had no description; version 2's tokens begin after it.
    const uint64_t begin = version == 1 ? kShardHeaderBytes : shard_tokens_offset(load_u32(head + 24));
    if ((version == 1 || version == kShardVersion) && (width == 2 || width == 4) && count < (uint64_t{1} << 60) &&
        begin + count * width == info.file_bytes) {
      throw std::runtime_error(where + "wrong magic at byte offset 0: " + first_bytes(head, 8) +
                               ", expected 'agtokens' (the rest of the header is attograd's)");
    }
  }
  if (info.file_bytes >= kLlmcHeaderBytes) {
    unsigned char llmc[12];
    file.read(0, llmc, sizeof llmc);
    const uint32_t version = load_u32(llmc + 4);
    const uint64_t count = load_u32(llmc + 8), width = version == 1 ? 2 : 4;
    if ((version == 1 || version == 2) && kLlmcHeaderBytes + count * width == info.file_bytes) {
      throw std::runtime_error(where + "wrong magic at byte offset 0: " + std::to_string(static_cast<int32_t>(load_u32(llmc))) +
                               ", expected llm.c's " + std::to_string(kLlmcShardMagic) +
                               " (the rest of the header is llm.c's)");
    }
  }
}

}  // namespace

const char* shard_layout_name(ShardLayout layout) {
  switch (layout) {
    case ShardLayout::attograd: return "attograd";
    case ShardLayout::llmc: return "llm.c";
    case ShardLayout::nanogpt: return "nanoGPT";
  }
  return "?";
}

int shard_token_bytes(int64_t vocab) { return vocab <= 65536 ? 2 : 4; }

namespace {

// The header of an open file (see the top); tokens not read.
ShardInfo read_header(const FileReader& file, const std::string& path, ShardFormat format) {
  ShardInfo info;
  info.path = path;
  info.file_bytes = file.size();
  const std::string where = "token shard " + quoted(path) + ": ";
  if (info.file_bytes == 0) throw std::runtime_error(where + "the file is empty (0 bytes)");
  unsigned char head[kShardHeaderBytes] = {};
  file.read(0, head, std::min<uint64_t>(sizeof head, info.file_bytes));
  const auto need_header = [&](uint64_t bytes, const char* layout) {
    if (info.file_bytes < bytes) {
      throw std::runtime_error(where + "truncated: " + std::to_string(info.file_bytes) + " bytes, shorter than " +
                               layout + "'s header of " + std::to_string(bytes) + " bytes (the file ends at byte offset " +
                               std::to_string(info.file_bytes) + ")");
    }
  };
  uint64_t declared = 0;
  if (info.file_bytes >= sizeof kShardMagic && std::memcmp(head, kShardMagic, sizeof kShardMagic) == 0) {
    info.layout = ShardLayout::attograd;
    need_header(kShardHeaderBytes, "attograd");
    const uint32_t version = load_u32(head + 8), width = load_u32(head + 12);
    if (version == 1) {
      throw std::runtime_error(where + "version 1 at byte offset 8: written before shards recorded the tokenizer "
                               "that made them, so what its tokens mean is unknown; make the shards again with "
                               "prepare_text");
    }
    if (version != kShardVersion) {
      throw std::runtime_error(where + "version " + std::to_string(version) + " at byte offset 8, this reader knows " +
                               std::to_string(kShardVersion));
    }
    if (width != 2 && width != 4) {
      throw std::runtime_error(where + "bytes per token " + std::to_string(width) +
                               " at byte offset 12, expected 2 (uint16) or 4 (uint32)");
    }
    info.token_bytes = static_cast<int>(width);
    declared = load_u64(head + 16);
    const uint64_t described = load_u32(head + 24);
    if (described == 0 || described > kMaxShardTokenizerBytes ||
        shard_tokens_offset(described) > info.file_bytes) {
      throw std::runtime_error(where + "the tokenizer's description at byte offset 24 is said to hold " +
                               std::to_string(described) + " bytes; expected 1 to " +
                               std::to_string(std::min(kMaxShardTokenizerBytes, info.file_bytes - kShardHeaderBytes)) +
                               " (the file has " + std::to_string(info.file_bytes) + " bytes)");
    }
    info.tokenizer.resize(described);
    file.read(kShardHeaderBytes, info.tokenizer.data(), described);
    const uint32_t recorded = load_u32(head + 28), actual = crc32c(info.tokenizer.data(), described);
    if (recorded != actual) {
      throw std::runtime_error(where + "the tokenizer's description (bytes " + std::to_string(kShardHeaderBytes) + " to " +
                               std::to_string(kShardHeaderBytes + described) + ") has CRC-32C " + std::to_string(actual) +
                               ", the header at byte offset 28 records " + std::to_string(recorded) + ": damaged");
    }
    info.header_bytes = shard_tokens_offset(described);
  } else if (info.file_bytes >= 4 && static_cast<int32_t>(load_u32(head)) == kLlmcShardMagic) {
    info.layout = ShardLayout::llmc;
    need_header(kLlmcHeaderBytes, "llm.c");
    const uint32_t version = load_u32(head + 4);
    if (version != 1 && version != 2) {
      throw std::runtime_error(where + "llm.c version " + std::to_string(version) +
                               " at byte offset 4, expected 1 (uint16 tokens) or 2 (uint32 tokens)");
    }
    info.header_bytes = kLlmcHeaderBytes;
    info.token_bytes = version == 1 ? 2 : 4;
    declared = load_u32(head + 8);
  } else {
    info.layout = ShardLayout::nanogpt;
    refuse_damaged_magic(file, info, head);
    if (format != ShardFormat::nanogpt) {
      throw std::runtime_error(where + "no attograd or llm.c header: its first bytes are " +
                               first_bytes(head, std::min<uint64_t>(8, info.file_bytes)) +
                               ". Not a token shard, or nanoGPT's raw uint16 tokens, read only when asked for "
                               "(train_gpt --shard-format nanogpt)");
    }
    if (info.file_bytes % 2 != 0) {
      throw std::runtime_error(where + "as nanoGPT's raw uint16 tokens its size " + std::to_string(info.file_bytes) +
                               " is odd: truncated, or not a token file (the last token would start at byte offset " +
                               std::to_string(info.file_bytes - 1) + ")");
    }
    declared = info.file_bytes / 2;
  }
  info.tokens = (info.file_bytes - info.header_bytes) / static_cast<uint64_t>(info.token_bytes);
  const uint64_t expected = info.header_bytes + declared * static_cast<uint64_t>(info.token_bytes);
  if (expected != info.file_bytes) {
    throw std::runtime_error(where + "the header (" + shard_layout_name(info.layout) + ") counts " +
                             std::to_string(declared) + " tokens of " + std::to_string(info.token_bytes) +
                             " bytes, which end at byte offset " + std::to_string(expected) + ", but the file has " +
                             std::to_string(info.file_bytes) + " bytes" +
                             (expected > info.file_bytes ? " (truncated)" : " (bytes after the tokens)"));
  }
  if (info.tokens == 0) throw std::runtime_error(where + "holds no tokens");
  return info;
}

}  // namespace

ShardInfo read_shard_header(const std::string& path, ShardFormat format) {
  const FileReader file(path);  // refuses what is not a regular file, naming it
  return read_header(file, path, format);
}

ShardInfo inspect_shard(const std::string& path, int64_t vocab, ShardFormat format) {
  const FileReader file(path);
  ShardInfo info = read_header(file, path, format);
  info.crc32c = checked_crc(file, info, 0, info.file_bytes, vocab);
  return info;
}

TokenShard::TokenShard(const std::string& path, int64_t vocab, ShardFormat format)
    : info_(inspect_shard(path, vocab, format)), vocab_(vocab) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("token shard " + quoted(path) + ": cannot open: " + std::strerror(errno));
  map_bytes_ = info_.file_bytes;
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) throw std::runtime_error("token shard " + quoted(path) + ": cannot map: " + std::strerror(err));
  map_ = static_cast<const unsigned char*>(p);
}

TokenShard::~TokenShard() {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

void TokenShard::read(uint64_t first, uint64_t n, int64_t* out) const {
  const uint64_t w = static_cast<uint64_t>(info_.token_bytes);
  const unsigned char* p = map_ + info_.header_bytes + first * w;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t token = token_at(p, info_.token_bytes, i);
    if (vocab_ > 0 && token >= static_cast<uint64_t>(vocab_)) {
      token_too_large(info_.path, info_.header_bytes + (first + i) * w, token, vocab_);
    }
    out[i] = token;
  }
  // Drop the pages just read from this process: the next read is elsewhere (or the page cache
  // has them), and pages kept would make the resident size grow with the steps.
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p + n * w);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

TokenStream::TokenStream(std::vector<std::shared_ptr<const TokenShard>> shards) : shards_(std::move(shards)) {
  uint64_t total = 0;
  for (const auto& s : shards_) {
    starts_.push_back(total);
    total += s->size();
  }
  starts_.push_back(total);
  end_ = total;
}

void TokenStream::read(uint64_t first, uint64_t n, int64_t* out) const {
  if (first + n > size()) {
    throw std::logic_error("TokenStream::read: tokens [" + std::to_string(first) + ", " + std::to_string(first + n) +
                           ") of " + std::to_string(size()));
  }
  uint64_t at = begin_ + first;
  // The shard holding `at`: the last whose start is <= at.
  size_t s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end() - 1, at) - starts_.begin()) - 1;
  while (n > 0) {
    const uint64_t in_shard = at - starts_[s];
    const uint64_t take = std::min(n, shards_[s]->size() - in_shard);
    shards_[s]->read(in_shard, take, out);
    out += take;
    at += take;
    n -= take;
    ++s;
  }
}

TokenStream TokenStream::slice(uint64_t begin, uint64_t end) const {
  if (begin > end || end > size()) throw std::logic_error("TokenStream::slice: out of range");
  TokenStream out = *this;
  out.begin_ = begin_ + begin;
  out.end_ = begin_ + end;
  return out;
}

std::vector<int64_t> TokenStream::to_vector() const {
  std::vector<int64_t> out(size());
  // In pieces, so each piece's pages are dropped as the copy goes.
  constexpr uint64_t kPiece = uint64_t{1} << 20;
  for (uint64_t at = 0; at < size(); at += kPiece) read(at, std::min(kPiece, size() - at), out.data() + at);
  return out;
}

}  // namespace ag
