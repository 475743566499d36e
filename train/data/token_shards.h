// Token shards: a tokenized corpus on disk, memory-mapped read-only, so a training run reads a
// set far larger than memory and keeps only the pages of the windows it is reading.
//
//   const ShardSet set = open_shard_set({"data/fineweb10B"}, tokenizer.vocab_size(), 0.9);
//   TextBatch b = sequential_batch(set.train, {.batch = 32, .block_size = 128}, step, {0, 32});
//
// Three layouts are read, each told from the file's first bytes (never from its name):
//   attograd  a 32-byte header: the 8 bytes "agtokens", uint32 version (1), uint32 bytes per
//             token (2 or 4: 4 when the vocabulary has more than 65536 ids), uint64 token count,
//             8 zero bytes; then the tokens, little-endian. prepare_text writes these.
//   llm.c     a header of 256 little-endian int32 (1024 bytes): [0] = 20240520, [1] = version
//             (1: uint16 tokens, GPT-2; 2: uint32 tokens, as llm.c writes for LLaMA 3),
//             [2] = token count; then the tokens (dev/data/data_common.py's write_datafile).
//   nanoGPT   no header at all: the whole file is little-endian uint16 tokens (its prepare.py's
//             train.bin / val.bin), so its size must be even.
// The rule: "agtokens" at offset 0 is ours, 20240520 in the first int32 is llm.c's, anything
// else is nanoGPT's raw uint16. A raw file whose first tokens happen to spell a magic would be
// misread; for GPT-2 ids it cannot happen (20240520 is the ids 54472, 308, and 54472 is past
// GPT-2's 50257). A file without either magic whose next bytes are one of the two headers (a
// known version and a count that fits the size exactly) has a damaged magic and is refused.
//
// A set: the arguments in order, a directory standing for its regular files whose names end in
// ".bin", sorted by name. A file whose name has "val" as a word (split at '_', '-', '.': llm.c's
// "fineweb_val_000000.bin", nanoGPT's "val.bin", prepare_text's "val_000000.bin") validates; the
// others train, concatenated in order. With no validation file, the last (1 - train_fraction) of
// the training tokens validate instead and the rest train (as split_tokens does for a text).
//
// Batches go through the training tokens in order, as llm.c's DataLoader does, so that any
// size of set is read once per epoch: the stream is cut into windows of block_size + 1 tokens
// that overlap by one (window w starts at token w * block_size), W = floor((n - 1) / block_size)
// of them, and row r of step s's global batch is window (s * batch + r) mod W. A pure function
// of the step, so a resumed run reads the very next token of an uninterrupted one, and each
// process of a data-parallel run reads only its own rows. Validation reads eval_windows windows
// at fixed, evenly spaced starts (shard_eval_batches), the same ones at every evaluation.
//
// Memory: a file is mapped once and never scanned. Each read copies a window's tokens out of
// the mapping and then drops its pages from this process (madvise MADV_DONTNEED; the kernel
// keeps them in the page cache), so the resident size does not grow with the set or with the
// steps taken. Opening a set reads each file's header and, for its fingerprint, at most its
// first and last MiB with pread (not through the mapping).
//
// Errors are std::runtime_error naming the file, the byte offset and the values involved: a file
// shorter than its header, a wrong magic or version, a token count that disagrees with the
// size, a token >= the vocabulary (found when a read meets it, or in the fingerprint's MiBs),
// no shard at all or no training shard; an empty file is refused too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attograd/train/data/text.h"

namespace ag {

enum class ShardLayout { attograd, llmc, nanogpt };
const char* shard_layout_name(ShardLayout layout);  // "attograd", "llm.c", "nanoGPT"

inline constexpr char kShardMagic[8] = {'a', 'g', 't', 'o', 'k', 'e', 'n', 's'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr uint64_t kShardHeaderBytes = 32;
inline constexpr int32_t kLlmcShardMagic = 20240520;
inline constexpr uint64_t kLlmcHeaderBytes = 256 * 4;

// What a shard's header (or, for nanoGPT's, its size) says, checked against the file's size.
struct ShardInfo {
  std::string path;
  ShardLayout layout = ShardLayout::nanogpt;
  uint64_t file_bytes = 0;
  uint64_t header_bytes = 0;  // where the tokens begin
  int token_bytes = 2;        // 2 (uint16) or 4 (uint32)
  uint64_t tokens = 0;
  // CRC-32C of the file's first and of its last MiB (the whole file when smaller), read with
  // pread: with the name, size and count, what a checkpoint records of the shard.
  uint32_t crc32c_head = 0, crc32c_tail = 0;
};

// The header of `path` read and checked (see the top); the fingerprint's MiBs also checked
// against `vocab` (0: not checked).
ShardInfo inspect_shard(const std::string& path, int64_t vocab = 0);

// One shard file, mapped read-only.
class TokenShard {
 public:
  TokenShard(const std::string& path, int64_t vocab);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const ShardInfo& info() const { return info_; }
  uint64_t size() const { return info_.tokens; }
  // Tokens [first, first + n) into out; their pages are dropped afterwards. Throws naming the
  // file and offset when a token is >= the vocabulary. first + n <= size().
  void read(uint64_t first, uint64_t n, int64_t* out) const;

 private:
  ShardInfo info_;
  int64_t vocab_ = 0;
  const unsigned char* map_ = nullptr;
  uint64_t map_bytes_ = 0;
};

// Tokens [begin, end) of shards laid end to end: a view, cheap to copy.
class TokenStream {
 public:
  TokenStream() = default;
  explicit TokenStream(std::vector<std::shared_ptr<const TokenShard>> shards);
  uint64_t size() const { return end_ - begin_; }
  // Tokens [first, first + n) of the view into out, across shard boundaries.
  void read(uint64_t first, uint64_t n, int64_t* out) const;
  TokenStream slice(uint64_t begin, uint64_t end) const;
  // All of the view in memory (for scoring a whole validation set).
  std::vector<int64_t> to_vector() const;
  const std::vector<std::shared_ptr<const TokenShard>>& shards() const { return shards_; }

 private:
  std::vector<std::shared_ptr<const TokenShard>> shards_;
  std::vector<uint64_t> starts_;  // of each shard in the concatenation, and the total last
  uint64_t begin_ = 0, end_ = 0;
};

struct ShardSet {
  TokenStream train, val;
  std::vector<ShardInfo> train_files, val_files;
  bool val_is_tail = false;  // no validation file: val is the training tokens' tail
};

// Whether a --data argument names shards: a directory, or a file whose name ends in ".bin".
bool names_token_shards(const std::string& argument);
// Whether a shard file validates: "val" is one of the words of its name.
bool is_validation_shard(const std::string& path);
// The shard files of the arguments (directories expanded, see the top); runtime_error when a
// directory holds none or the list is empty.
std::vector<std::string> list_token_shards(const std::vector<std::string>& arguments);
// The set: every file inspected and mapped. train_fraction (0, 1) is used only without a
// validation file.
ShardSet open_shard_set(const std::vector<std::string>& arguments, int64_t vocab, double train_fraction);

// Rows [rows_begin, rows_begin + rows) of step `step`'s global batch (see the top): inputs and
// targets (rows, block_size). invalid_argument when the stream is shorter than block_size + 1.
TextBatch sequential_batch(const TokenStream& tokens, const TextBatchOptions& options, int64_t step,
                           int64_t rows_begin, int64_t rows);
// The validation batches: max_windows windows evenly spaced over the stream, as eval_batches
// places them over a vector of tokens (the same starts, so the same batches for the same tokens).
std::vector<TextBatch> shard_eval_batches(const TokenStream& tokens, const TextBatchOptions& options,
                                          int64_t max_windows);

// Writes a shard of our layout: tokens appended in pieces, the header's count filled in on
// commit, the file renamed into place only then (AtomicFile). token_bytes: 2 or 4.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, int token_bytes);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  // invalid_argument for a token that does not fit token_bytes.
  void append(const int64_t* tokens, size_t n);
  uint64_t tokens() const { return count_; }
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int token_bytes_;
  uint64_t count_ = 0;
};

// The bytes per token a vocabulary needs: 2 up to 65536 ids, else 4.
int shard_token_bytes(int64_t vocab);

}  // namespace ag
