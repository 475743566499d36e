// JSON through nlohmann-json, with the guarantees attograd's files rely on. Internal to the
// library (not installed): public headers speak std::string, so users need no JSON library.
//
//   const Json header = parse_json(text);                 // JsonError says what and where
//   OrderedJson row = {{"step", 10}, {"loss", 0.25}};     // keys kept in insertion order
//   std::string line = row.dump();                        // {"step":10,"loss":0.25}
//
// Guarantees, each tested in tests/train/test_json.cpp:
//   * strict RFC 8259 (no comments, trailing commas, NaN literals), and no byte order mark
//     before the text or NUL byte in it (nlohmann's lexer would skip the one and stop at the
//     other, ignoring whatever follows);
//   * parsing takes time linear in the text whatever its shape (n log n in the members of the
//     largest object), so a hostile header cannot make a loader hang;
//   * a key repeated within one object is an error (a safetensors header with two entries of
//     one name is corrupt), naming the key;
//   * nesting deeper than kMaxJsonDepth is an error, so a hostile header cannot exhaust memory
//     or the stack;
//   * integers stay exact (int64 and uint64, not doubles), and doubles are written in the
//     shortest form that reads back to the same bits (resume is bit-exact through metadata);
//   * JSON has no NaN or infinity: dump() writes a non-finite double as null, and readers of
//     metrics treat null as "no value".
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ag {

// Parsed documents are std::map-backed (lookups in O(log n) for headers of many keys);
// documents we write keep their keys in insertion order, so files read and diff well.
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

inline constexpr int kMaxJsonDepth = 64;

// A malformed document; the message says what was wrong and where (line, column or key).
class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Json parse_json(std::string_view text);

// The keys of the top-level object of `text` other than `except`, counted without building the
// document (linear time, memory bounded by the nesting limit); 0 when the text is not an
// object. Malformed text is a JsonError, as for parse_json. A reader that must bound a
// document's size before building it counts first.
size_t count_object_keys(std::string_view text, std::string_view except = {});

// The value as int64 when it is a JSON integer that fits (nlohmann keeps non-negative
// integers as uint64), else nullopt: a fraction, a string or 2^63 and above are not int64.
std::optional<int64_t> json_int64(const Json& value);

// "an object", "a string", ...: for messages.
const char* json_type_name(const Json& value);

// Parses an options document: `text` must be a JSON object whose keys are all in `known`.
// Every failure (malformed text, not an object, an unknown key) is std::invalid_argument
// starting with `op`, e.g. "trainer_options_from_json: unknown field \"lr_max\"".
Json parse_options_object(const std::string& text, std::initializer_list<std::string_view> known,
                          const std::string& op);

// The typed fields of one parsed options object, each error (std::invalid_argument) naming the
// caller `op`, the key and the value found:
//   const OptionFields f{j, op, text};
//   o.lr = f.number("lr");  o.steps = f.integer("steps");  o.name = f.string("name");
struct OptionFields {
  const Json& j;
  const std::string& op;
  const std::string& text;

  const Json& field(const char* key) const {
    const auto it = j.find(key);
    if (it == j.end()) throw std::invalid_argument(op + "missing \"" + key + "\" in " + text);
    return *it;
  }
  bool has(const char* key) const { return j.contains(key); }
  int64_t integer(const char* key) const {
    const Json& v = field(key);
    const std::optional<int64_t> i = json_int64(v);
    if (!i) throw std::invalid_argument(op + "\"" + key + "\" must be an integer, got " + v.dump());
    return *i;
  }
  const Json& typed(const char* key, bool ok(const Json&), const char* what) const {
    const Json& v = field(key);
    if (!ok(v)) throw std::invalid_argument(op + "\"" + key + "\" must be " + what + ", got " + v.dump());
    return v;
  }
  bool boolean(const char* key) const {
    return typed(key, [](const Json& v) { return v.is_boolean(); }, "a boolean").get<bool>();
  }
  double number(const char* key) const {
    return typed(key, [](const Json& v) { return v.is_number(); }, "a number").get<double>();
  }
  std::string string(const char* key) const {
    return typed(key, [](const Json& v) { return v.is_string(); }, "a string").get<std::string>();
  }
  uint64_t unsigned_integer(const char* key) const {
    return typed(key, [](const Json& v) { return v.is_number_unsigned(); }, "an unsigned integer").get<uint64_t>();
  }
};

// Validates options parsed by `op` with their own validate(), prefixing its message with `op`.
template <typename Options>
Options validated(Options o, const std::string& op) {
  try {
    validate(o);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(op + e.what());
  }
  return o;
}

// Seeds are uint64: written as an integer when it fits JSON readers' int64, as a decimal string
// otherwise; read back from either (std::invalid_argument starting with `op`, naming `key`).
OrderedJson seed_json(uint64_t seed);
uint64_t seed_from_json(const Json& value, const std::string& op, const char* key);

}  // namespace ag
