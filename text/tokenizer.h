// Tokenizers: text to ids and back. A Tokenizer is a value (cheap to copy) over one kind of
// tokenizer; four kinds are built in and a new one is added from outside without touching them.
//
//   const Tokenizer tok = Tokenizer::characters(text);   // one id per distinct UTF-8 character
//   const Tokenizer raw = Tokenizer::bytes();            // the 256 byte values
//   const Tokenizer gpt2 = Tokenizer::bpe(BytePairEncoding::gpt2());  // byte-pair encoding (bpe.h)
//   std::vector<int64_t> ids = tok.encode("hello");  tok.decode(ids) == "hello";
//   Tokenizer again = Tokenizer::from_json(tok.to_json());   // what a checkpoint stores
//
// A kind is a TokenizerKind: its name (the "kind" of its JSON description), vocabulary size,
// encode, the bytes of each id, its description, and where a text may be cut so that the ids of
// the pieces are those of the whole (for encoding a corpus in pieces, text_stream.h). A kind
// that is read back from a description registers a reader under its name:
//
//   struct Rot13 : TokenizerKind { ... const char* name() const override { return "rot13"; } ... };
//   register_tokenizer_kind("rot13", [](const std::string& json) { return std::make_shared<Rot13>(...); });
//   Tokenizer t(std::make_shared<Rot13>());                 // and Tokenizer::from_json finds it
//
// The built-in kinds: "char" (the distinct UTF-8 code points of a text, sorted by their bytes;
// the text must be valid UTF-8, and encode names a character it does not know and its byte
// offset), "byte" (the 256 byte values, any bytes), "bpe" (bpe.h) and "hf_bpe" (a Hugging Face
// tokenizer.json, hf_tokenizer.h). Their descriptions:
// {"kind":"byte"}, {"kind":"char","symbols":["\n"," ","a",...]} (the characters as JSON strings,
// id = position), and the byte-pair encoding's own ({"kind":"bpe",...}). Errors are
// std::invalid_argument saying what is wrong: a description's field, a character, an id.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ag {

class BytePairEncoding;

// One kind of tokenizer: what a Tokenizer forwards to. Implementations are immutable.
class TokenizerKind {
 public:
  virtual ~TokenizerKind() = default;
  // The "kind" of the description ("char", "byte", "bpe", ...).
  virtual const char* name() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  // The bytes id stands for; id in [0, vocab_size()) (Tokenizer checks it).
  virtual std::string token(int64_t id) const = 0;
  // The JSON description, an object whose "kind" is name().
  virtual std::string to_json() const = 0;
  // The largest cut c in (from, text.size()) such that encoding text[0, c) and what follows
  // separately gives the ids of encoding them together; 0 when none is known. The default: after
  // a newline between two printable non-blank ASCII characters, where the built-in kinds never
  // join tokens across.
  virtual size_t last_safe_cut(std::string_view text, size_t from) const;
};

// Reads a description of one kind (the whole JSON text) into that kind; std::invalid_argument
// saying what is wrong.
using TokenizerReader = std::function<std::shared_ptr<const TokenizerKind>(const std::string& json)>;
// Makes Tokenizer::from_json read descriptions whose "kind" is `name`. std::invalid_argument
// when the name is empty or taken (the built-in kinds' included).
void register_tokenizer_kind(const std::string& name, TokenizerReader reader);
// The registered kinds' names, sorted.
std::vector<std::string> tokenizer_kind_names();

class Tokenizer {
 public:
  // The byte-level tokenizer.
  Tokenizer();
  // A tokenizer of any kind; std::invalid_argument for a null kind.
  explicit Tokenizer(std::shared_ptr<const TokenizerKind> kind);

  // The distinct UTF-8 characters of `text`, sorted. Throws std::invalid_argument for empty
  // text or text that is not valid UTF-8 (naming the byte offset; use bytes() for such text).
  static Tokenizer characters(const std::string& text);
  static Tokenizer bytes();
  static Tokenizer bpe(const BytePairEncoding& encoding);
  // The description's kind read by its registered reader, which checks every field (for "char":
  // symbols non-empty, one valid UTF-8 character each, strictly increasing by bytes; none for
  // "byte"); std::invalid_argument says what is wrong, an unknown kind naming the known ones.
  static Tokenizer from_json(const std::string& json);
  std::string to_json() const { return kind_->to_json(); }

  const TokenizerKind& kind() const { return *kind_; }
  const char* kind_name() const { return kind_->name(); }  // "char", "byte", "bpe", ...
  // The byte-pair encoding of a bpe tokenizer; std::logic_error for the other kinds.
  const BytePairEncoding& byte_pairs() const;
  int64_t vocab_size() const { return kind_->vocab_size(); }
  std::vector<int64_t> encode(const std::string& text) const { return kind_->encode(text); }
  std::string decode(const std::vector<int64_t>& ids) const;
  std::string decode(int64_t id) const;
  // The length in bytes of each id's text, indexed by id: a character's UTF-8 length, 1 for a
  // byte. What a loss in bits per byte divides by, so that runs with different tokenizers are
  // measured on one scale (every kind of tokenizer answers it).
  std::vector<int64_t> token_bytes() const;

 private:
  std::shared_ptr<const TokenizerKind> kind_;
};

// A tokenizer in a message, told apart from another of the same kind and size by the checksum
// of its description: "byte tokenizer of 256 ids", "bpe tokenizer of 50257 ids in GPT-2's byte
// order (description CRC-32C 0a1b2c3d)".
std::string describe_tokenizer(const Tokenizer& tokenizer);
// The same of a description (Tokenizer::to_json), or what is wrong with it.
std::string describe_tokenizer_json(const std::string& json);

}  // namespace ag
