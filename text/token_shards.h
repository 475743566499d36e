// Token shards: a tokenized corpus on disk, memory-mapped read-only, so a training run reads a
// set far larger than memory and keeps only the pages of the windows it is reading.
//
//   const ShardSet set = open_shard_set({"data/fineweb10B"}, tokenizer.vocab_size(), 0.9);
//   TextBatch b = sequential_batch(set.train, {.batch = 32, .block_size = 128}, step, {0, 32});
//
// Three layouts are read, each told from the file's first bytes (never from its name):
//   attograd  a 32-byte header: the 8 bytes "agtokens", uint32 version (2), uint32 bytes per
//             token (2 or 4: 4 when the vocabulary has more than 65536 ids), uint64 token count,
//             uint32 length L and uint32 CRC-32C of the tokenizer's description; then the
//             description (Tokenizer::to_json, L > 0 bytes) and zeros up to a multiple of 8
//             bytes; then the tokens, little-endian. prepare_text writes these. Version 1 (no
//             description) is refused: its tokens cannot say what they mean.
//   llm.c     a header of 256 little-endian int32 (1024 bytes): [0] = 20240520, [1] = version
//             (1: uint16 tokens, GPT-2; 2: uint32 tokens, as llm.c writes for LLaMA 3),
//             [2] = token count; then the tokens (dev/data/data_common.py's write_datafile).
//             No tokenizer is recorded: the run names it.
//   nanoGPT   no header at all: the whole file is little-endian uint16 tokens (its prepare.py's
//             train.bin / val.bin), so its size must be even. Read only when asked
//             (ShardFormat::nanogpt, train_gpt's --shard-format nanogpt): otherwise a file
//             without a header is refused, as text, zeros or a damaged shard would be.
// The rule: "agtokens" at offset 0 is ours, 20240520 in the first int32 is llm.c's, anything
// else is nanoGPT's raw uint16 when that was asked for. A raw file whose first tokens happen
// to spell a magic would be misread; for GPT-2 ids it cannot happen (20240520 is the ids 54472,
// 308, and 54472 is past GPT-2's 50257). A file without either magic whose next bytes are one of
// the two headers (a known version and a count that fits the size exactly) has a damaged magic
// and is refused.
//
// A set: the arguments in order, a directory standing for its files whose names end in ".bin",
// sorted by name (one that is not a regular file, a dangling link say, is refused by name). A
// file whose name has "val" as a word (split at '_', '-', '.': llm.c's "fineweb_val_000000.bin",
// nanoGPT's "val.bin", prepare_text's "val_000000.bin") validates; the others train,
// concatenated in order. With no validation file, the last (1 - train_fraction) of the training
// tokens validate instead and the rest train (as split_tokens does for a text). The files of a
// set agree on their tokenizer: all record the same description, or none records one.
//
// Batches go through the training tokens in order, as llm.c's DataLoader does, so that any
// size of set is read once per epoch: the stream is cut into windows of block_size + 1 tokens
// that overlap by one (window w starts at token w * block_size), W = floor((n - 1) / block_size)
// of them, and row r of step s's global batch is window (s * batch + r) mod W. A pure function
// of the step, so a resumed run reads the very next token of an uninterrupted one, and each
// process of a data-parallel run reads only its own rows. Validation reads eval_windows windows
// at fixed, evenly spaced starts (shard_eval_batches), the same ones at every evaluation.
//
// Memory: a file is mapped once. Opening a set reads each file whole once, in 64 KiB pieces
// with pread (not through the mapping), for its CRC-32C and to check every token against the
// vocabulary: a checkpoint records the checksums, so a resume on data changed anywhere is
// refused, and a bad token is found before the first step (about 1 GB/s: 20 s for llm.c's
// FineWeb 10B). Each read of a window copies its tokens out of the mapping and then drops its
// pages from this process (madvise MADV_DONTNEED; the kernel keeps them in the page cache), so
// the resident size does not grow with the set or with the steps taken.
//
// Errors are std::runtime_error naming the file, the byte offset and the values involved: a file
// shorter than its header, a wrong magic or version, a token count that disagrees with the
// size, a token >= the vocabulary, a description that is damaged or differs between files, no
// shard at all or no training shard; an empty file is refused too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attograd/text/corpus.h"

namespace ag {

enum class ShardLayout { attograd, llmc, nanogpt };
// headed: a file is read by its header (ours or llm.c's) only; nanogpt: a file without one is
// nanoGPT's raw uint16 tokens.
enum class ShardFormat { headed, nanogpt };
const char* shard_layout_name(ShardLayout layout);  // "attograd", "llm.c", "nanoGPT"

inline constexpr char kShardMagic[8] = {'a', 'g', 't', 'o', 'k', 'e', 'n', 's'};
inline constexpr uint32_t kShardVersion = 2;
inline constexpr uint64_t kShardHeaderBytes = 32;
// The largest tokenizer description a header may announce (a vocabulary's bound, bpe.h).
inline constexpr uint64_t kMaxShardTokenizerBytes = uint64_t{256} << 20;
// Where the tokens of our layout begin after a description of `bytes`: 8-byte aligned.
inline constexpr uint64_t shard_tokens_offset(uint64_t bytes) { return kShardHeaderBytes + (bytes + 7) / 8 * 8; }
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
  // The tokenizer's description (Tokenizer::to_json) the header records; empty when the layout
  // records none (llm.c's, nanoGPT's).
  std::string tokenizer;
  // CRC-32C of the whole file, read with pread when the file is inspected: with the name, size
  // and count, what a checkpoint records of the shard. 0 after read_shard_header.
  uint32_t crc32c = 0;
};

// The header of `path` read and checked (see the top), without reading the tokens.
ShardInfo read_shard_header(const std::string& path, ShardFormat format = ShardFormat::headed);
// The header, then the whole file read for its checksum and every token checked against `vocab`
// (0: not checked).
ShardInfo inspect_shard(const std::string& path, int64_t vocab = 0, ShardFormat format = ShardFormat::headed);

// One shard file, mapped read-only.
class TokenShard {
 public:
  TokenShard(const std::string& path, int64_t vocab, ShardFormat format = ShardFormat::headed);
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
  std::string tokenizer;     // the description all files record, or empty when none records one
};

// Whether a --data argument names shards: a directory, or a file whose name ends in ".bin".
bool names_token_shards(const std::string& argument);
// Whether a shard file validates: "val" is one of the words of its name.
bool is_validation_shard(const std::string& path);
// The shard files of the arguments (directories expanded, see the top); runtime_error when a
// directory holds none or the list is empty.
std::vector<std::string> list_token_shards(const std::vector<std::string>& arguments);
// The tokenizer's description the files of the arguments agree on (see the top), from their
// headers alone: empty when none records one; runtime_error naming two files that differ.
std::string shard_set_tokenizer(const std::vector<std::string>& arguments, ShardFormat format = ShardFormat::headed);
// The set: every file inspected and mapped. train_fraction (0, 1) is used only without a
// validation file.
ShardSet open_shard_set(const std::vector<std::string>& arguments, int64_t vocab, double train_fraction,
                        ShardFormat format = ShardFormat::headed);

// Rows [rows_begin, rows_begin + rows) of step `step`'s global batch (see the top): inputs and
// targets (rows, block_size). invalid_argument when the stream is shorter than block_size + 1.
TextBatch sequential_batch(const TokenStream& tokens, const TextBatchOptions& options, int64_t step,
                           int64_t rows_begin, int64_t rows);
// The validation batches: max_windows windows evenly spaced over the stream, as eval_batches
// places them over a vector of tokens (the same starts, so the same batches for the same tokens).
std::vector<TextBatch> shard_eval_batches(const TokenStream& tokens, const TextBatchOptions& options,
                                          int64_t max_windows);

// Writes a shard of our layout: tokens appended in pieces, the header's count filled in on
// commit, the file renamed into place only then (AtomicFile). token_bytes: 2 or 4; tokenizer:
// the description of the tokenizer that made the tokens (Tokenizer::to_json), not empty.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, int token_bytes, const std::string& tokenizer);
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
  std::string tokenizer_;
  uint64_t count_ = 0;
};

// The bytes per token a vocabulary needs: 2 up to 65536 ids, else 4.
int shard_token_bytes(int64_t vocab);

}  // namespace ag
