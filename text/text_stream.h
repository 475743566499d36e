// A text tokenized piece by piece with the tokens of the whole: for corpora larger than memory
// (tools/prepare_text), held to bounded memory.
//
//   ChunkedEncoder enc(tokenizer, 1 << 20);
//   std::vector<int64_t> ids;
//   while (read a block) enc.push(block, ids);   // appends the tokens of what is safe so far
//   enc.finish(ids);                             // and of the rest
//   // ids == tokenizer.encode(whole text)
//
// Text is held back until it holds chunk_bytes, then cut at the last place where cutting
// changes nothing, and the part before it is encoded. For the byte tokenizer every place is
// such a place. For byte-pair encodings (GPT-2's pattern) and characters it is after a newline
// whose neighbours on both sides are printable ASCII other than the blank ("x\ny"): no pattern
// piece holds both a newline and a non-blank, the newline after a non-blank is a piece of its
// own whether or not text follows, and the text after it starts a piece either way; a special
// token ("<|endoftext|>") holds no newline. (A cut after any newline would not do: GPT-2's
// `\s+(?!\S)` makes "\n\n b" one blank run where "\n" + "\n b" gives two.) A text without such
// a place for a long stretch is held until one comes: the memory is chunk_bytes plus the
// longest such stretch (a text of one line is held whole).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attograd/text/corpus.h"

namespace ag {

// The last place in `text` (an offset in (0, text.size())) where it can be cut for `tokenizer`,
// or 0 when there is none (its kind's TokenizerKind::last_safe_cut); only cuts after byte `from`
// are looked for (the byte after a cut is looked at, so the end of the text is no place).
inline size_t last_safe_cut(std::string_view text, const Tokenizer& tokenizer, size_t from = 0) {
  return tokenizer.kind().last_safe_cut(text, from);
}

class ChunkedEncoder {
 public:
  // chunk_bytes >= 1: how much text is gathered before a piece is encoded.
  ChunkedEncoder(const Tokenizer& tokenizer, size_t chunk_bytes);
  // Appends the tokens of the text that can be encoded now.
  void push(std::string_view bytes, std::vector<int64_t>& out);
  // Appends the tokens of the text held back.
  void finish(std::vector<int64_t>& out);
  size_t held_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  size_t chunk_bytes_;
  std::string pending_;
  size_t searched_ = 0;  // pending_[0, searched_) holds no place to cut
  size_t next_try_ = 0;  // the size of pending_ at which to look for one again
};

}  // namespace ag
