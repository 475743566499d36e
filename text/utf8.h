// Strict UTF-8 decoding (RFC 3629), shared by the character tokenizer (which refuses text that
// is not UTF-8) and the byte-pair encoder (which pre-tokenises the valid runs of a text and
// keeps every invalid byte as it is). Internal: not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ag {

// U+0000 .. U+10FFFF.
inline constexpr uint32_t kCodePoints = 0x110000;

struct CodePoint {
  uint32_t value = 0;
  size_t length = 0;  // bytes; 0 when the sequence is invalid
  const char* problem = nullptr;
};

// Decodes the code point at text[pos] strictly (RFC 3629): no overlong forms, no surrogates,
// nothing above U+10FFFF, no missing continuation bytes.
inline CodePoint decode_utf8(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return {.value = lead, .length = 1, .problem = nullptr};
  size_t length = 0;
  uint32_t value = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead < 0xC2) {
    return {.value = 0, .length = 0,
            .problem = lead < 0xC0 ? "a continuation byte where a character should start" : "an overlong encoding"};
  } else if (lead < 0xE0) {
    length = 2;
    value = lead & 0x1Fu;
  } else if (lead < 0xF0) {
    length = 3;
    value = lead & 0x0Fu;
    if (lead == 0xE0) low = 0xA0;   // below: overlong
    if (lead == 0xED) high = 0x9F;  // above: a UTF-16 surrogate
  } else if (lead < 0xF5) {
    length = 4;
    value = lead & 0x07u;
    if (lead == 0xF0) low = 0x90;   // below: overlong
    if (lead == 0xF4) high = 0x8F;  // above: beyond U+10FFFF
  } else {
    return {.value = 0, .length = 0, .problem = "a byte that never occurs in UTF-8"};
  }
  for (size_t k = 1; k < length; ++k) {
    if (pos + k >= text.size()) return {.value = 0, .length = 0, .problem = "a sequence truncated by the end of the text"};
    const unsigned char c = byte(pos + k);
    if (c < 0x80 || c > 0xBF) return {.value = 0, .length = 0, .problem = "a sequence missing continuation bytes"};
    if (k == 1 && (c < low || c > high)) {
      const char* why = lead == 0xED ? "a UTF-16 surrogate" : lead == 0xF4 ? "a code point above U+10FFFF" : "an overlong encoding";
      return {.value = 0, .length = 0, .problem = why};
    }
    value = (value << 6) | (c & 0x3Fu);
  }
  return {.value = value, .length = length, .problem = nullptr};
}

}  // namespace ag
