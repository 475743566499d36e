#include "train/json_text.h"

#include <limits>
#include <unordered_set>
#include <vector>

namespace ag {

Json parse_json(std::string_view text) {
  // The callback sees every key before its value: one set of keys per open object finds a
  // repeated key in linear time, and the depth of every container start is bounded.
  std::vector<std::unordered_set<std::string>> open_objects;
  const Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          throw JsonError("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        }
        if (event == Json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end: open_objects.pop_back(); break;
      case Json::parse_event_t::key:
        if (!open_objects.back().insert(parsed.get<std::string>()).second) {
          throw JsonError("duplicate key \"" + parsed.get<std::string>() + "\" at nesting depth " + std::to_string(depth));
        }
        break;
      case Json::parse_event_t::array_end:
      case Json::parse_event_t::value: break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ..." minus the tag.
    std::string what = e.what();
    if (const size_t tag_end = what.find("] "); what.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos) {
      what = what.substr(tag_end + 2);
    }
    throw JsonError(what);
  }
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

Json parse_options_object(const std::string& text, std::initializer_list<std::string_view> known,
                          const std::string& op) {
  Json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    throw std::invalid_argument(op + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument(op + "expected an object, got " + text);
  for (const auto& [key, value] : j.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) throw std::invalid_argument(op + "unknown field \"" + key + "\"");
  }
  return j;
}

}  // namespace ag
