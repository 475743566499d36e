#include "attograd/train/io/json_text.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace ag {

namespace {

// "[json.exception.parse_error.101] parse error at line 1, column 9: ..." minus the tag.
std::string without_tag(const std::string& what) {
  const size_t tag_end = what.find("] ");
  if (what.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos) return what.substr(tag_end + 2);
  return what;
}

// What nlohmann's lexer would otherwise let through: it skips a UTF-8 byte order mark at the
// start and takes a NUL byte for the end of the input (so "{} \0 garbage" would parse).
void refuse_bom_and_nul(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF")) {
    throw JsonError("the text starts with a UTF-8 byte order mark (bytes EF BB BF), which is not JSON");
  }
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw JsonError("a NUL byte at offset " + std::to_string(nul) + " of " + std::to_string(text.size()) +
                    " (JSON text has none; the text may be cut short or padded with zeros)");
  }
}

// The events every SAX handler of ours treats alike: nesting is bounded on the way in, a syntax
// error becomes a JsonError, and binary values (not JSON) are refused.
struct StrictSax {
  size_t depth = 0;

  void enter() {
    if (depth >= static_cast<size_t>(kMaxJsonDepth)) {
      throw JsonError("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    ++depth;
  }
  bool binary(Json::binary_t&) { throw JsonError("binary values are not JSON"); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    throw JsonError(without_tag(e.what()));
  }
};

// Builds the document as it is read, the way nlohmann's own parser does, but inserts each
// object member once: a repeated key is found (and named) as it is inserted, in O(log n),
// with no pass over the object at its end. (nlohmann's callback parser scans the enclosing
// object for discarded values at the end of every object, which made a header of n object
// entries take time quadratic in n.)
class DocumentBuilder : public StrictSax {
 public:
  Json document;

  bool null() { return add(nullptr); }
  bool boolean(bool v) { return add(v); }
  bool number_integer(Json::number_integer_t v) { return add(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return add(v); }
  bool number_float(Json::number_float_t v, const std::string&) { return add(v); }
  bool string(std::string& v) { return add(std::move(v)); }
  bool start_object(size_t) { return open(Json::object()); }
  bool start_array(size_t) { return open(Json::array()); }
  bool key(std::string& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

 private:
  // Places `value` in the innermost open container (or as the document) and returns it.
  template <typename Value>
  Json& place(Value&& value) {
    if (open_.empty()) {
      document = Json(std::forward<Value>(value));
      return document;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) return parent.get_ref<Json::array_t&>().emplace_back(std::forward<Value>(value));
    const auto [it, inserted] = parent.get_ref<Json::object_t&>().emplace(std::move(key_), std::forward<Value>(value));
    if (!inserted) throw JsonError("duplicate key \"" + it->first + "\"");
    return it->second;
  }
  template <typename Value>
  bool add(Value&& value) {
    place(std::forward<Value>(value));
    return true;
  }
  // A container stays where it was placed while it is open: only it grows until it closes.
  bool open(Json empty) {
    enter();
    open_.push_back(&place(std::move(empty)));
    return true;
  }
  bool close() {
    open_.pop_back();
    --depth;
    return true;
  }

  std::vector<Json*> open_;
  std::string key_;
};

// Counts the top-level object's keys (other than one) and builds nothing.
class KeyCounter : public StrictSax {
 public:
  explicit KeyCounter(std::string_view except) : except_(except) {}
  size_t count = 0;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(Json::number_integer_t) { return true; }
  bool number_unsigned(Json::number_unsigned_t) { return true; }
  bool number_float(Json::number_float_t, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool start_object(size_t) { return open(true); }
  bool start_array(size_t) { return open(false); }
  bool key(std::string& k) {
    if (depth == 1 && top_is_object_ && k != except_) ++count;
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

 private:
  bool open(bool object) {
    if (depth == 0) top_is_object_ = object;
    enter();
    return true;
  }
  bool close() {
    --depth;
    return true;
  }

  std::string_view except_;
  bool top_is_object_ = false;
};

}  // namespace

Json parse_json(std::string_view text) {
  refuse_bom_and_nul(text);
  DocumentBuilder builder;
  Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json, /*strict=*/true,
                  /*ignore_comments=*/false);
  return std::move(builder.document);
}

size_t count_object_keys(std::string_view text, std::string_view except) {
  refuse_bom_and_nul(text);
  KeyCounter counter(except);
  Json::sax_parse(text.begin(), text.end(), &counter, nlohmann::detail::input_format_t::json, /*strict=*/true,
                  /*ignore_comments=*/false);
  return counter.count;
}

std::optional<int64_t> json_int64(const Json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

const char* json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::binary: return "binary data";
    case Json::value_t::discarded: return "nothing";
  }
  return "?";
}

Json parse_json_object(const std::string& text, const std::string& op) {
  Json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    throw std::invalid_argument(op + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument(op + "expected an object, got " + text);
  return j;
}

Json parse_options_object(const std::string& text, const std::vector<std::string_view>& known,
                          const std::string& op) {
  const Json j = parse_json_object(text, op);
  for (const auto& [key, value] : j.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) throw std::invalid_argument(op + "unknown field \"" + key + "\"");
  }
  return j;
}

OrderedJson seed_json(uint64_t seed) {
  if (seed <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return seed;
  return std::to_string(seed);
}

uint64_t seed_from_json(const Json& j, const std::string& op, const char* key) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();  // a full uint64 written as a number
  if (const auto v = json_int64(j); v && *v >= 0) return static_cast<uint64_t>(*v);
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (!s.empty() && s.size() <= 20 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      try {
        return std::stoull(s);
      } catch (const std::out_of_range&) {
      }
    }
  }
  throw std::invalid_argument(op + key + " must be an unsigned 64-bit integer, got " + j.dump());
}

}  // namespace ag
