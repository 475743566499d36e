// Pre-tokenisation for byte-pair encoding: a text cut into chunks by a regular expression
// (PCRE2, UTF mode with Unicode properties, JIT-compiled), shared by encoding (bpe.cpp) and
// training (bpe_train.cpp). Internal: PCRE2's types stay out of the installed headers.
//
// Bytes that are not valid UTF-8 match no part of GPT-2's pattern (PCRE2 documents the same
// for its PCRE2_MATCH_INVALID_UTF mode): each maximal run of them is one chunk, and the valid
// text around it is matched as if the run were the text's end or start. The pattern looks
// ahead but never behind, so that is exactly what matching the whole text in that mode does;
// doing the UTF-8 check here lets the matcher skip its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ag {

class Pretokenizer {
 public:
  // std::invalid_argument naming `source` and PCRE2's message when the pattern does not compile.
  Pretokenizer(const std::string& pattern, const std::string& source);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // PCRE2's scratch space for matching: one per thread.
  class Matcher {
   public:
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;

   private:
    friend class Pretokenizer;
    explicit Matcher(void* data) : data_(data) {}
    void* data_;  // pcre2_match_data
  };
  std::unique_ptr<Matcher> matcher() const;

  // Calls chunk(std::string_view) for each chunk of `text`, in order; the chunks cover the
  // text exactly.

  template <typename Fn>
  void for_each_chunk(Matcher& m, std::string_view text, Fn&& chunk) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  // The end of the match of the pattern starting exactly at `offset` of the valid UTF-8 run
  // `run` (every character matches some alternative of GPT-2's pattern; a pattern that leaves
  // a character unmatched makes it a chunk of its own).
  size_t match_end(Matcher& m, std::string_view run, size_t offset) const;
};

// The end of the maximal valid UTF-8 run starting at `pos`, and of the invalid run after it.
size_t valid_utf8_end(std::string_view text, size_t pos);
size_t invalid_utf8_end(std::string_view text, size_t pos);

template <typename Fn>
void Pretokenizer::for_each_chunk(Matcher& m, std::string_view text, Fn&& chunk) const {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t valid_end = valid_utf8_end(text, pos);
    const std::string_view run = text.substr(pos, valid_end - pos);
    for (size_t offset = 0; offset < run.size();) {
      const size_t end = match_end(m, run, offset);
      chunk(run.substr(offset, end - offset));
      offset = end;
    }
    pos = valid_end;
    if (pos < text.size()) {
      const size_t invalid_end = invalid_utf8_end(text, pos);
      chunk(text.substr(pos, invalid_end - pos));
      pos = invalid_end;
    }
  }
}

// Cut points that split `text` into about `pieces` parts which pre-tokenise independently:
// each cut is just after a newline that is followed by a printable ASCII character other than
// a space. Such a newline always ends a chunk (no part of the pattern runs from whitespace into
// a visible character, except a literal space), and the pattern never looks behind, so the
// chunks of the parts are the chunks of the whole. Cuts never fall inside an occurrence of one
// of `specials`. Returns the part boundaries, from 0 to text.size().
std::vector<size_t> independent_parts(std::string_view text, int64_t pieces, const std::vector<std::string>& specials);

}  // namespace ag
