#include "train/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <unordered_set>

namespace ag {

namespace {

// Deep enough for any header or log row we write; shallow enough never to exhaust the stack.
constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Json document() {
    skip_space();
    Json value = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw JsonError("json: " + what + " at byte " + std::to_string(pos_));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  void expect(char c) {
    if (peek() != c || at_end()) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  void expect_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("invalid literal (expected " + std::string(word) + ")");
    pos_ += word.size();
  }

  Json parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    if (at_end()) fail("unexpected end of input");
    switch (peek()) {
      case '{': return parse_object(depth);
      case '[': return parse_array(depth);
      case '"': return Json(parse_string());
      case 't': expect_word("true"); return Json(true);
      case 'f': expect_word("false"); return Json(false);
      case 'n': expect_word("null"); return Json(nullptr);
      default: return parse_number();
    }
  }

  Json parse_object(int depth) {
    expect('{');
    Json::Object members;
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return Json::object(std::move(members));
    }
    // Keys seen so far, hashed: a header of a million keys is checked in linear time.
    std::unordered_set<std::string> seen;
    while (true) {
      skip_space();
      if (peek() != '"') fail("expected a string key");
      const size_t key_pos = pos_;
      std::string key = parse_string();
      if (!seen.insert(key).second) {
        pos_ = key_pos;
        fail("duplicate key \"" + key + "\"");
      }
      skip_space();
      expect(':');
      skip_space();
      Json value = parse_value(depth + 1);
      members.emplace_back(std::move(key), std::move(value));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return Json::object(std::move(members));
      }
      fail("expected ',' or '}' in an object");
    }
  }

  Json parse_array(int depth) {
    expect('[');
    Json::Array items;
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return Json::array(std::move(items));
    }
    while (true) {
      skip_space();
      items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return Json::array(std::move(items));
      }
      fail("expected ',' or ']' in an array");
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("invalid hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        --pos_;
        fail("control character in a string (must be escaped)");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate needs its low half
            if (text_.substr(pos_, 2) != "\\u") fail("unpaired surrogate in \\u escape");
            pos_ += 2;
            const uint32_t low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("invalid low surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired surrogate in \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default: --pos_; fail(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  Json parse_number() {
    const size_t start = pos_;
    // Validate the RFC 8259 grammar first: from_chars alone would accept "01", "+1" or "inf".
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++pos_;
    } else {
      pos_ = start;
      fail("expected a value");
    }
    bool integral = true;
    if (peek() == '.') {
      integral = false;
      ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit after '.'");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit in the exponent");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      int64_t v = 0;
      const auto [ptr, ec] = std::from_chars(first, last, v);
      if (ec == std::errc() && ptr == last) return Json(v);
      // Too large for int64: fall through to a double, as other JSON readers do.
    }
    double d = 0;
    const auto [ptr, ec] = std::from_chars(first, last, d);
    if (ec != std::errc() || ptr != last) {
      pos_ = start;
      fail("number out of range");
    }
    return Json(d);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

[[noreturn]] void type_error(const char* wanted, Json::Type got) {
  throw JsonError(std::string("json: expected ") + wanted + ", got " + json_type_name(got));
}

}  // namespace

const char* json_type_name(Json::Type type) {
  switch (type) {
    case Json::Type::null: return "null";
    case Json::Type::boolean: return "a boolean";
    case Json::Type::integer: return "an integer";
    case Json::Type::number: return "a number";
    case Json::Type::string: return "a string";
    case Json::Type::array: return "an array";
    case Json::Type::object: return "an object";
  }
  return "?";
}

Json Json::object(Object members) {
  std::unordered_set<std::string_view> seen;
  seen.reserve(members.size());
  for (const auto& [key, value] : members) {
    if (!seen.insert(key).second) throw std::invalid_argument("Json::object: duplicate key \"" + key + "\"");
  }
  return Json(std::move(members));
}

Json Json::parse(std::string_view text) { return Parser(text).document(); }

bool Json::as_bool() const {
  if (!is_bool()) type_error("a boolean", type());
  return std::get<bool>(value_);
}

int64_t Json::as_int() const {
  if (!is_integer()) type_error("an integer", type());
  return std::get<int64_t>(value_);
}

double Json::as_double() const {
  if (is_integer()) return static_cast<double>(std::get<int64_t>(value_));
  if (type() != Type::number) type_error("a number", type());
  return std::get<double>(value_);
}

const std::string& Json::as_string() const {
  if (!is_string()) type_error("a string", type());
  return std::get<std::string>(value_);
}

const Json::Array& Json::as_array() const {
  if (!is_array()) type_error("an array", type());
  return std::get<Array>(value_);
}

const Json::Object& Json::as_object() const {
  if (!is_object()) type_error("an object", type());
  return std::get<Object>(value_);
}

Json::Array& Json::as_array() {
  if (!is_array()) type_error("an array", type());
  return std::get<Array>(value_);
}

Json::Object& Json::as_object() {
  if (!is_object()) type_error("an object", type());
  return std::get<Object>(value_);
}

const Json* Json::find(std::string_view key) const {
  for (const auto& [k, v] : as_object()) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  const Json* v = find(key);
  if (v == nullptr) throw JsonError("json: missing key \"" + std::string(key) + "\"");
  return *v;
}

void Json::set(std::string key, Json value) {
  Object& members = as_object();
  for (auto& [k, v] : members) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  members.emplace_back(std::move(key), std::move(value));
}

const Json& Json::at(size_t index) const {
  const Array& items = as_array();
  if (index >= items.size()) {
    throw JsonError("json: index " + std::to_string(index) + " is out of range for an array of " +
                    std::to_string(items.size()));
  }
  return items[index];
}

void Json::push_back(Json value) { as_array().push_back(std::move(value)); }

size_t Json::size() const {
  if (is_array()) return std::get<Array>(value_).size();
  if (is_object()) return std::get<Object>(value_).size();
  type_error("an array or an object", type());
}

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += kHex[(c >> 4) & 0xF];
          out += kHex[c & 0xF];
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

void Json::dump_to(std::string& out) const {
  switch (type()) {
    case Type::null: out += "null"; return;
    case Type::boolean: out += std::get<bool>(value_) ? "true" : "false"; return;
    case Type::integer: out += std::to_string(std::get<int64_t>(value_)); return;
    case Type::number: {
      const double d = std::get<double>(value_);
      if (!std::isfinite(d)) {
        out += "null";
        return;
      }
      char buf[32];
      const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest exact round trip
      std::string_view text(buf, static_cast<size_t>(ptr - buf));
      out += text;
      // Keep a double recognisable as one ("2.0", not "2") so that it reads back as a number.
      if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
      (void)ec;
      return;
    }
    case Type::string: append_json_string(out, std::get<std::string>(value_)); return;
    case Type::array: {
      out += '[';
      bool first = true;
      for (const Json& item : std::get<Array>(value_)) {
        if (!first) out += ',';
        first = false;
        item.dump_to(out);
      }
      out += ']';
      return;
    }
    case Type::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : std::get<Object>(value_)) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, key);
        out += ':';
        value.dump_to(out);
      }
      out += '}';
      return;
    }
  }
}

std::string Json::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

Json parse_options_object(const std::string& text, std::initializer_list<std::string_view> known,
                          const std::string& op) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const JsonError& e) {
    throw std::invalid_argument(op + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument(op + "expected an object, got " + text);
  for (const auto& entry : j.as_object()) {
    if (std::find(known.begin(), known.end(), entry.first) == known.end()) {
      throw std::invalid_argument(op + "unknown field \"" + entry.first + "\"");
    }
  }
  return j;
}

}  // namespace ag
