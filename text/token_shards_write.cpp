// Token shards: the writer of attograd's own layout (token_shards.h), through an atomic file.
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/text/token_shards.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/crc32c.h"

namespace ag {

struct ShardWriter::Impl {
  AtomicFile file;
  std::vector<unsigned char> buf;
  explicit Impl(const std::string& path) : file(path) {}
};

ShardWriter::ShardWriter(const std::string& path, int token_bytes, const std::string& tokenizer)
    : token_bytes_(token_bytes), tokenizer_(tokenizer) {
  if (token_bytes != 2 && token_bytes != 4) {
    throw std::invalid_argument("ShardWriter: bytes per token must be 2 or 4, got " + std::to_string(token_bytes));
  }
  if (tokenizer.empty() || tokenizer.size() > kMaxShardTokenizerBytes) {
    throw std::invalid_argument("ShardWriter: the tokenizer's description must hold 1 to " +
                                std::to_string(kMaxShardTokenizerBytes) + " bytes, got " + std::to_string(tokenizer.size()));
  }
  impl_ = std::make_unique<Impl>(path);
  // The header with a count of 0 for now (commit() writes the real one), the description and
  // its padding.
  const unsigned char zeros[kShardHeaderBytes] = {};
  impl_->file.write(zeros, sizeof zeros);
  impl_->file.write(tokenizer.data(), tokenizer.size());
  impl_->file.write(zeros, shard_tokens_offset(tokenizer.size()) - kShardHeaderBytes - tokenizer.size());
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::append(const int64_t* tokens, size_t n) {
  const int64_t limit = token_bytes_ == 2 ? int64_t{65535} : int64_t{0xffffffff};
  std::vector<unsigned char>& buf = impl_->buf;
  buf.resize(n * static_cast<size_t>(token_bytes_));
  unsigned char* p = buf.data();
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = tokens[i];
    if (t < 0 || t > limit) {
      throw std::invalid_argument("ShardWriter: token " + std::to_string(t) + " does not fit " +
                                  std::to_string(token_bytes_) + " bytes ('" + impl_->file.path() + "')");
    }
    for (int b = 0; b < token_bytes_; ++b) *p++ = static_cast<unsigned char>(static_cast<uint64_t>(t) >> (8 * b));
  }
  impl_->file.write(buf.data(), buf.size());
  count_ += n;
}

void ShardWriter::commit() {
  unsigned char header[kShardHeaderBytes] = {};
  std::memcpy(header, kShardMagic, sizeof kShardMagic);
  const auto put = [&](size_t at, uint64_t v, int bytes) {
    for (int b = 0; b < bytes; ++b) header[at + static_cast<size_t>(b)] = static_cast<unsigned char>(v >> (8 * b));
  };
  put(8, kShardVersion, 4);
  put(12, static_cast<uint64_t>(token_bytes_), 4);
  put(16, count_, 8);
  put(24, tokenizer_.size(), 4);
  put(28, crc32c(tokenizer_.data(), tokenizer_.size()), 4);
  impl_->file.write_at(0, header, sizeof header);
  impl_->file.commit();
}

}  // namespace ag
