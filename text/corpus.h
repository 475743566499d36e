// Text for a language model: the corpus, a tokenizer, the train/validation split and random
// batches of windows.
//
//   const std::string text = read_corpus("");                   // Debian's fortunes
//   const Corpus corpus = read_corpus_sources({"bible", "my.txt"});  // several, joined
//   const Tokenizer tok = Tokenizer::characters(text);           // or Tokenizer::bytes()
//   const TextSplit data = split_tokens(tok.encode(text), 0.9);
//   TextBatch batch = sample_batch(data.train, {.batch = 32, .block_size = 128}, seed, step);
//   // batch.inputs, batch.targets: Indices (32, 128); targets are the inputs shifted by one
//
// The corpus: a file given by the user (any bytes but NUL; UTF-8 for character-level text), or
// a named corpus of a Debian package:
//   fortunes  (the default, no path) every fortune file of the `fortunes` package under
//             /usr/share/games/fortunes/ in sorted order (the `.dat` index files and symlinks
//             skipped, each `%` separator line removed), joined by newlines; 2.5 MB.
//   bible     the King James Bible of `bible-kjv-text`, one verse per line without its
//             reference, as its reader `bible` (package `bible-kjv`) prints it: the package
//             keeps the text compressed in its own format (/usr/lib/bible.data); 4.1 MB.
// Several sources (read_corpus_sources) are joined in the given order, each text as it is, with
// a newline put after a text that does not end with one when another follows (so no file's last
// line runs into the next file's first). Each source is refused by name (std::invalid_argument)
// when it is missing, not a regular file, unreadable, empty or holds a NUL byte (no text does:
// it is a binary file, or UTF-16), the offset of the NUL named.
//
// The tokenizer (tokenizer.h): character-level, byte-level, GPT-2's or a trained byte-pair
// encoding (bpe.h), or a kind of one's own; its JSON description is kept in a checkpoint's
// metadata, so generation needs no data file.
//
// Batches: window b of a batch starts at a position drawn from the counter-based generator
// (core/rng.h) as a pure function of (seed, step, b), so the batch of a step is the same
// whether or not the run was stopped and resumed before it. The stream is (seed, step, call 2^62),
// a call number no model reaches, so the windows do not repeat a dropout mask's bits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/text/tokenizer.h"  // Tokenizer, which the text is read with

namespace ag {

// The default corpus directory.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
// The program that prints the bible corpus (package bible-kjv, which reads bible-kjv-text).
inline constexpr const char* kBibleProgram = "/usr/bin/bible";

// Whether `source` names a corpus ("fortunes", "bible") rather than a file. Names win: a file
// called `bible` in the current directory is `./bible`.
bool is_corpus_name(const std::string& source);

// The whole text of `path`, or of the fortunes corpus when `path` is empty. Throws
// std::invalid_argument naming the file when it is missing, not a regular file, unreadable,
// empty or holds a NUL byte (for the default corpus: when the directory is missing or holds no
// fortune file, with the hint `apt-get install fortunes`).
std::string read_corpus(const std::string& path);

// What one source gave a corpus: what a checkpoint records, so that a resume (or another rank)
// on other files is refused, naming them.
struct CorpusPart {
  std::string name;     // the corpus name, or the file's name without its directory
  int64_t bytes = 0;    // of its text
  uint32_t crc32c = 0;  // of its text
};
struct Corpus {
  std::string text;  // the sources' texts joined as described at the top
  std::vector<CorpusPart> parts;
};
// The sources (corpus names or file paths) in order; none is the fortunes. Throws as
// read_corpus, naming the source.
Corpus read_corpus_sources(const std::vector<std::string>& sources);
// Valid UTF-8 from the bytes of tokens drawn one at a time, for printing as they come: a
// byte-level token may hold part of a character, or bytes no text holds. push() returns what is
// complete, each byte that cannot be part of a character as U+FFFD (the replacement character,
// as Python's decode(errors="replace") gives), and holds back a character still incomplete;
// finish() returns what is held back, each of its bytes as U+FFFD.
class Utf8Printer {
 public:
  std::string push(std::string_view bytes);
  std::string finish();

 private:
  std::string pending_;
};

// Tokens [0, cut) train and [cut, n) validate, cut = floor(n * train_fraction).
struct TextSplit {
  std::vector<int64_t> train, val;
};
// Throws std::invalid_argument unless 0 < train_fraction < 1.
TextSplit split_tokens(const std::vector<int64_t>& tokens, double train_fraction);

struct TextBatchOptions {
  int64_t batch = 0;       // windows per batch, >= 1
  int64_t block_size = 0;  // tokens per window, >= 1
};

struct TextBatch {
  Indices inputs;   // (batch, block_size)
  Indices targets;  // (batch, block_size): each window's next tokens
};

// Random windows of block_size + 1 tokens from `tokens`, drawn as described at the top: starts
// are uniform in [0, n - block_size - 1]. Throws std::invalid_argument naming both numbers when
// tokens.size() < block_size + 1 (the text is too short for the context: lower --block-size or
// give more text), and for batch < 1, block_size < 1 or step < 0.
TextBatch sample_batch(const std::vector<int64_t>& tokens, const TextBatchOptions& options, uint64_t seed,
                       int64_t step);

// The validation loss's batches: windows at fixed, evenly spaced starts covering `tokens` (at most
// `max_windows` of them, max_windows >= 1; the first starts at 0, the last at the end of the text),
// so every evaluation sees the same text. Every batch has options.batch rows (the window count is
// rounded down to a multiple of it, so the mean of batch losses is the mean over windows), except
// when the text holds fewer windows than one batch: then a single batch of all of them. Same
// errors as sample_batch.
std::vector<TextBatch> eval_batches(const std::vector<int64_t>& tokens, const TextBatchOptions& options,
                                    int64_t max_windows);

// All of `tokens` as windows: window i starts at i * block_size, for every window whose next
// tokens fit, floor((n - 1) / block_size) of them, so each token but the first is predicted once.
// In batches of options.batch rows, the last one shorter when they do not divide. The loss over
// a whole validation split (train_gpt --eval-full). Same errors as sample_batch.
std::vector<TextBatch> tiled_batches(const std::vector<int64_t>& tokens, const TextBatchOptions& options);

}  // namespace ag
