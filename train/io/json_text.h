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
#include <tuple>
#include <type_traits>
#include <vector>

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

// Parses a document that must be a JSON object, whatever its keys; malformed text or another
// value is std::invalid_argument starting with `op`.
Json parse_json_object(const std::string& text, const std::string& op);

// Parses an options document: `text` must be a JSON object whose keys are all in `known`.
// Every failure (malformed text, not an object, an unknown key) is std::invalid_argument
// starting with `op`, e.g. "trainer_options_from_json: unknown field \"lr_max\"".
Json parse_options_object(const std::string& text, const std::vector<std::string_view>& known,
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
};

// Seeds are uint64: written as an integer when it fits JSON readers' int64, as a decimal string
// otherwise; read back from either (std::invalid_argument starting with `op`, naming `key`).
OrderedJson seed_json(uint64_t seed);
uint64_t seed_from_json(const Json& value, const std::string& op, const char* key);

// Runs `read`; a std::invalid_argument it throws gets `op` in front unless it starts with it.
template <typename Read>
auto prefixed(const std::string& op, Read read) -> decltype(read()) {
  try {
    return read();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw std::invalid_argument(what.rfind(op, 0) == 0 ? what : op + what);
  }
}

// Validates options parsed by `op` with their own validate(), prefixing its message with `op`.
template <typename Options>
Options validated(Options o, const std::string& op) {
  return prefixed(op, [&] { return validate(o), o; });
}

// An options struct's fields, listed once and read in both directions. The list is a generic
// lambda calling field(key, member) for each field in the file's order; an enum member adds its
// name and parse functions (then kKeepIfAbsent, below, if marked). int64_t is a JSON integer,
// double a number, bool a boolean and uint64_t a seed (seed_json).
//
//   constexpr auto kFields = [](auto& o, auto&& field) {
//     field("d_model", o.d_model);  field("dropout", o.dropout);
//     field("positional", o.positional, positional_kind_name, parse_positional_kind);
//   };
//   std::string text = fields_to_json(options, kFields).dump();
//   Options back = fields_from_json(text, kFields, "options_from_json: ", Options{});
// A field marked with kKeepIfAbsent may be missing from a document (one written before the
// field existed): reading then keeps `base`'s value. It is always written.
struct KeepIfAbsent {};
inline constexpr KeepIfAbsent kKeepIfAbsent{};

template <typename Options, typename Fields>
OrderedJson fields_to_json(const Options& o, Fields fields) {
  OrderedJson j = OrderedJson::object();
  fields(o, [&]<typename T>(const char* key, const T& value, [[maybe_unused]] auto... extra) {
    if constexpr (std::is_enum_v<T>) {
      j[key] = std::get<0>(std::tuple(extra...))(value);
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      j[key] = seed_json(value);
    } else {
      j[key] = value;
    }
  });
  return j;
}

// The fields of `text` over `base`: every listed key must be there with its type, and no other
// key but `also_known` (entries the caller reads itself). std::invalid_argument starting with `op`.
template <typename Options, typename Fields>
Options fields_from_json(const std::string& text, Fields fields, const std::string& op, Options base,
                         std::initializer_list<std::string_view> also_known = {}) {
  std::vector<std::string_view> known(also_known);
  fields(base, [&](const char* key, auto&&...) { known.push_back(key); });
  const Json j = parse_options_object(text, known, op);
  const OptionFields f{j, op, text};
  return prefixed(op, [&] {
    fields(base, [&]<typename T>(const char* key, T& value, auto... extra) {
      if ((std::is_same_v<decltype(extra), KeepIfAbsent> || ...) && !f.has(key)) return;
      if constexpr (std::is_enum_v<T>) {
        value = std::get<1>(std::tuple(extra...))(f.string(key));
      } else if constexpr (std::is_same_v<T, int64_t>) {
        value = f.integer(key);
      } else if constexpr (std::is_same_v<T, double>) {
        value = f.number(key);
      } else if constexpr (std::is_same_v<T, bool>) {
        value = f.boolean(key);
      } else {
        static_assert(std::is_same_v<T, uint64_t>, "a field is int64_t, double, bool, uint64_t or an enum");
        value = seed_from_json(f.field(key), op, key);
      }
    });
    return base;
  });
}

// A whole options struct from `text`: its fields over the defaults, then its own validate().
// The JSON of a model family's options is this over one field list (models/gpt/gpt_options.cpp).
template <typename Options, typename Fields>
Options options_from_json(const std::string& text, Fields fields, const std::string& op) {
  return validated(fields_from_json(text, fields, op, Options{}), op);
}

}  // namespace ag
