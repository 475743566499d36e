// Hugging Face's tokenizer.json for byte-level BPE, the tokenizers of GPT-2, Llama 3, Qwen2 and
// Qwen3, SmolLM and most chat models since: read into a Tokenizer of kind "hf_bpe", and written
// from a byte-pair encoding trained here (or GPT-2's), so that Hugging Face's libraries load it.
//
//   const Tokenizer llama3 = read_hf_tokenizer("Meta-Llama-3-8B/tokenizer.json");
//   llama3.encode("<|begin_of_text|>Hello, world")   // {128000, 9906, 11, 1917}
//   Tokenizer again = Tokenizer::from_json(llama3.to_json());   // what a checkpoint stores
//   write_file_atomically("mine/tokenizer.json", hf_tokenizer_json(train_bpe(texts, options)));
//
// Encoding follows the reference (Hugging Face's `tokenizers`, without add_special_tokens):
//  1. Bytes that are not UTF-8 become U+FFFD, one per maximal invalid subsequence (Unicode's
//     "substitution of maximal subparts", what TextDecoder and Python's errors="replace" do): the
//     reference takes only strings, and that is how its callers turn bytes into one.
//  2. The added tokens (<|begin_of_text|>, <|im_start|>, ...) are found in that text first, the
//     longest one where several start at the leftmost place; lstrip/rstrip make a token take the
//     whitespace before/after it. Each one is its id; the text between them goes on alone.
//  3. The normalizer (none, or NFC as Qwen's files ask, through ICU) and the pre-tokenizer: a
//     Split by the file's regular expression (PCRE2, as GPT-2's pattern in bpe.h) then ByteLevel,
//     or a ByteLevel that splits by GPT-2's own pattern.
//  4. Each chunk is merged by the ranks of the file's merges, as bpe.h merges; with ignore_merges
//     (Llama 3) a chunk that is itself a token of the vocabulary is that token, unmerged.
// Decoding gives each id's bytes (a special's text), so decode(encode(x)) == x for valid UTF-8
// that normalization leaves alone; a token that ends inside a character gives its bytes as they
// are (the reference's decode would print U+FFFD for them).
//
// Read: model.type "BPE" with "vocab" and "merges" (as "a b" strings or ["a", "b"] pairs),
// byte_fallback (moot: every byte has its token), ignore_merges; normalizer null or NFC;
// pre_tokenizer ByteLevel (use_regex true) or a Sequence of a Split (Regex, behavior Isolated)
// and a ByteLevel (use_regex false), add_prefix_space false; added_tokens with lstrip/rstrip
// (single_word refused, normalized: true only without a normalizer); decoder ByteLevel. The
// post_processor is not applied (encode adds no <|begin_of_text|>), truncation and padding are
// the caller's. Anything else (WordPiece, Unigram, another pre-tokenizer or normalizer) is refused
// with std::invalid_argument naming the file and the field, and so is a file that is not JSON or
// whose vocabulary, merges or ids do not agree.
#pragma once

#include <string>

#include "attograd/text/bpe.h"
#include "attograd/text/tokenizer.h"

namespace ag {

// The kind's name, the "kind" of its description: a tokenizer.json with "kind":"hf_bpe" added.
inline constexpr const char* kHFTokenizerKind = "hf_bpe";

// A tokenizer.json file. std::invalid_argument naming the file and what is wrong.
Tokenizer read_hf_tokenizer(const std::string& path);
// The same from the text of one; errors name `source`.
Tokenizer hf_tokenizer_from_json(const std::string& json, const std::string& source);
// A byte-pair encoding of ours as a tokenizer.json: the same ids, the same merges in the same
// order (so the same ids for any valid UTF-8 text), the specials as added tokens.
// std::invalid_argument when two of its tokens have the same bytes (tokenizer.json names a token
// by its text, so it cannot give one text two ids).
std::string hf_tokenizer_json(const BytePairEncoding& bpe);

// The tokenizer.json of a byte-pair tokenizer: an hf_bpe one's own, a "bpe" one's as
// hf_tokenizer_json writes it. std::invalid_argument naming the kind for any other.
std::string tokenizer_json_file(const Tokenizer& tokenizer);

// A tokenizer as the programs name one: "byte", "gpt2", a tokenizer.json (a JSON file whose object has a
// "model"), or a vocabulary file written by train_bpe. Errors name the file.
Tokenizer load_tokenizer(const std::string& name_or_path);

}  // namespace ag
