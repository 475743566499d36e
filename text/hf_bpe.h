// What a byte-level BPE tokenizer.json describes, once read and checked (hf_tokenizer.cpp), and
// the tokenizer kind that encodes with it (hf_bpe.cpp). Internal: not installed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attograd/text/tokenizer.h"

namespace ag {

struct HFAddedToken {
  int32_t id = 0;
  std::string content;
  bool special = true, lstrip = false, rstrip = false, normalized = false;
};

struct HFMerge {
  int32_t left = 0, right = 0, merged = 0;  // ids; the rank is the merge's index
};

struct HFByteLevelBPE {
  std::vector<std::string> tokens;  // the bytes of every id, 0 .. N-1
  std::vector<bool> in_model;       // the id is in model.vocab (else an added token only)
  std::vector<HFMerge> merges;      // in rank order; a pair listed twice keeps its last rank
  std::string pattern;              // the Split's regular expression (GPT-2's for a plain ByteLevel)
  bool nfc = false;                 // the normalizer is NFC (else none)
  bool ignore_merges = false, byte_fallback = false;
  std::vector<HFAddedToken> added;  // in the file's order
};

// The kind over a checked description; std::invalid_argument naming `source` when the pattern does
// not compile.
std::shared_ptr<const TokenizerKind> make_hf_bpe_kind(HFByteLevelBPE spec, const std::string& source);
// The kind read from a tokenizer.json's text (hf_tokenizer.cpp); errors name `source`.
std::shared_ptr<const TokenizerKind> read_hf_bpe_kind(const std::string& json, const std::string& source);
// The tokenizer.json text of a description, with "kind":"hf_bpe" first when `with_kind` (the
// Tokenizer's description), without it for a file other programs read.
std::string hf_bpe_json(const HFByteLevelBPE& spec, bool with_kind);
// Bytes as tokenizer.json writes a token: one character per byte, by GPT-2's byte-to-unicode
// table (a space is "Ġ").
std::string byte_level_text(const std::string& bytes);

}  // namespace ag
