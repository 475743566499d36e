// The chunks of a text for byte-pair encoding: PCRE2 over the valid UTF-8 runs (pretokenize.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "attograd/text/pretokenize.h"

#include <pcre2.h>

#include <algorithm>
#include <stdexcept>

#include "attograd/text/utf8.h"

namespace ag {

struct Pretokenizer::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Pretokenizer::Matcher::~Matcher() { pcre2_match_data_free(static_cast<pcre2_match_data*>(data_)); }

Pretokenizer::Pretokenizer(const std::string& pattern, const std::string& source) : code_(std::make_unique<Code>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UCP: \s, \w and friends follow Unicode, as in the regex engines GPT-2 and tiktoken use
  // (without it PCRE2's \s is ASCII whitespace only, and U+3000 would not be a space).
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                              &error, &offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::invalid_argument(source + ": the pre-tokenisation pattern does not compile at offset " +
                                std::to_string(offset) + ": " + reinterpret_cast<const char*>(message) +
                                " (pattern: " + pattern + ")");
  }
  // The JIT makes matching several times faster; where it is not available (some CPUs, or a
  // PCRE2 built without it) the interpreter gives the same matches.
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

Pretokenizer::~Pretokenizer() = default;

std::unique_ptr<Pretokenizer::Matcher> Pretokenizer::matcher() const {
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  if (data == nullptr) throw std::bad_alloc();
  return std::unique_ptr<Matcher>(new Matcher(data));
}

size_t Pretokenizer::match_end(Matcher& m, std::string_view run, size_t offset) const {
  // The run was checked to be UTF-8, so PCRE2 need not check it again (on every call, which
  // would make the loop quadratic in the run's length).
  pcre2_match_data* data = static_cast<pcre2_match_data*>(m.data_);
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(run.data()), run.size(), offset,
                             PCRE2_NO_UTF_CHECK, data, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return run.size();
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof message);
    throw std::runtime_error(std::string("pre-tokenisation: PCRE2 failed to match: ") +
                             reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
  // Text the pattern skips before its match is a chunk of its own (GPT-2's pattern skips
  // nothing); an empty match takes one character, so the loop always advances.
  if (ovector[0] > offset) return ovector[0];
  if (ovector[1] > offset) return ovector[1];
  const size_t length = decode_utf8(run, offset).length;
  return offset + std::max<size_t>(length, 1);
}

size_t valid_utf8_end(std::string_view text, size_t pos) {
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t length = decode_utf8(text, pos).length;
    if (length == 0) break;
    pos += length;
  }
  return pos;
}

size_t invalid_utf8_end(std::string_view text, size_t pos) {
  while (pos < text.size() && static_cast<unsigned char>(text[pos]) >= 0x80 && decode_utf8(text, pos).length == 0) ++pos;
  return pos;
}

namespace {

// Whether `cut` lies strictly inside an occurrence of one of the specials.
bool inside_special(std::string_view text, size_t cut, const std::vector<std::string>& specials) {
  for (const std::string& s : specials) {
    const size_t from = cut >= s.size() ? cut - s.size() + 1 : 0;
    const size_t found = text.find(s, from);
    if (found != std::string_view::npos && found < cut) return true;
  }
  return false;
}

}  // namespace

std::vector<size_t> independent_parts(std::string_view text, int64_t pieces, const std::vector<std::string>& specials) {
  std::vector<size_t> cuts = {0};
  const size_t step = text.size() / static_cast<size_t>(std::max<int64_t>(pieces, 1));
  for (int64_t p = 1; p < pieces && step > 0; ++p) {
    size_t at = std::max(cuts.back(), static_cast<size_t>(p) * step);
    for (; at < text.size(); ++at) {
      const size_t newline = text.find('\n', at);
      if (newline == std::string_view::npos || newline + 1 >= text.size()) {
        at = text.size();
        break;
      }
      at = newline + 1;
      const unsigned char next = static_cast<unsigned char>(text[at]);
      if (next > 0x20 && next < 0x7F && !inside_special(text, at, specials)) break;
      at = newline;  // the loop's ++at moves past it
    }
    if (at >= text.size()) break;
    cuts.push_back(at);
  }
  cuts.push_back(text.size());
  return cuts;
}

}  // namespace ag
