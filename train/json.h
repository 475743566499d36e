// A small JSON value with a strict parser and a compact writer: enough for safetensors headers,
// checkpoint metadata and metrics logs, so that train/ needs no third-party JSON library.
//
//   Json header = Json::parse(text);              // throws JsonError with the byte offset
//   int64_t end = header.at("w").at("data_offsets").at(1).as_int();
//   Json row = Json::object({{"step", 10}, {"loss", 0.25}});
//   std::string line = row.dump();                // {"step":10,"loss":0.25}
//
// Invariants and choices:
//   * objects keep their keys in insertion order (so files diff cleanly); a duplicate key is a
//     parse error, because a safetensors header with two entries of one name is corrupt;
//   * integers that fit int64 stay exact (data offsets, steps); other numbers are doubles and
//     are written in the shortest form that reads back to the same double;
//   * JSON has no NaN or infinity: dump() writes a non-finite double as null;
//   * the parser accepts only RFC 8259 JSON (no comments, trailing commas or NaN) and limits
//     nesting depth, so a hostile header cannot exhaust the stack.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace ag {

// A malformed document; the message gives the byte offset and what was expected.
class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Json {
 public:
  enum class Type { null, boolean, integer, number, string, array, object };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : value_(b) {}
  // Every integer type (int, long, long long, size_t, ...) is stored as int64; an unsigned
  // value above INT64_MAX throws std::invalid_argument.
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  Json(I v) : value_(to_int64(v)) {}
  Json(double v) : value_(v) {}
  Json(const char* s) : value_(std::string(s)) {}
  Json(std::string s) : value_(std::move(s)) {}
  Json(std::string_view s) : value_(std::string(s)) {}

  static Json array(Array items = {}) { return Json(std::move(items)); }
  // Throws std::invalid_argument on a duplicate key.
  static Json object(Object members = {});

  static Json parse(std::string_view text);

  Type type() const { return static_cast<Type>(value_.index()); }
  bool is_null() const { return type() == Type::null; }
  bool is_bool() const { return type() == Type::boolean; }
  bool is_integer() const { return type() == Type::integer; }
  bool is_number() const { return type() == Type::integer || type() == Type::number; }
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }
  bool is_object() const { return type() == Type::object; }

  // Typed access; each throws JsonError naming the expected and the actual type.
  bool as_bool() const;
  int64_t as_int() const;      // integers only (a number with a fraction is an error)
  double as_double() const;    // any number
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Array& as_array();
  Object& as_object();

  // Object members: find returns null when absent; at throws JsonError naming the key.
  const Json* find(std::string_view key) const;
  const Json& at(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Sets (or replaces) a member; the value must be an object.
  void set(std::string key, Json value);
  // Array elements.
  const Json& at(size_t index) const;
  void push_back(Json value);
  size_t size() const;  // elements of an array or members of an object

  // Compact single-line text (no spaces), valid JSON.
  std::string dump() const;

  friend bool operator==(const Json&, const Json&) = default;

 private:
  explicit Json(Array items) : value_(std::move(items)) {}
  explicit Json(Object members) : value_(std::move(members)) {}
  void dump_to(std::string& out) const;
  template <std::integral I>
  static int64_t to_int64(I v) {
    if constexpr (std::is_unsigned_v<I>) {
      if (static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw std::invalid_argument("Json: integer " + std::to_string(v) + " does not fit int64");
      }
    }
    return static_cast<int64_t>(v);
  }

  // The order of alternatives matches Type.
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> value_{nullptr};
};

const char* json_type_name(Json::Type type);

// Appends s as a quoted JSON string literal (escaping quotes, backslashes, control characters).
void append_json_string(std::string& out, std::string_view s);

// Parses an options document: `text` must be a JSON object whose keys are all in `known`.
// Every failure (malformed text, not an object, an unknown key) is std::invalid_argument
// starting with `op`, e.g. "trainer_options_from_json: unknown field \"lr_max\"".
Json parse_options_object(const std::string& text, std::initializer_list<std::string_view> known,
                          const std::string& op);

}  // namespace ag
