#include "attograd/train/io/json_text.h"

#include <algorithm>
#include <limits>
#include <unordered_set>
#include <vector>

namespace ag {

namespace {

// The first key that occurs twice in `object`'s text, found on the error path only: the object
// is parsed again with a set of its keys (objects nested in it are checked on their own).
std::string first_repeated_key(std::string_view text) {
  std::vector<std::unordered_set<std::string>> open_objects;
  std::string repeated;
  const Json::parser_callback_t find = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == Json::parse_event_t::object_end) open_objects.pop_back();
    if (event == Json::parse_event_t::key && repeated.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  const Json discarded = Json::parse(text.begin(), text.end(), find, /*allow_exceptions=*/false);
  (void)discarded;  // only the callback's findings matter
  return repeated;
}

}  // namespace

Json parse_json(std::string_view text) {
  // The callback counts the keys of every open object; an object that ends with fewer members
  // than keys had a repeated key (the map keeps one). Counting costs nothing per key, so a
  // header of millions of keys parses at the library's own speed; the name of the repeated key
  // is looked up afterwards. The depth of every container start is bounded as well.
  std::vector<size_t> keys_seen;
  bool repeated = false;
  const Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          throw JsonError("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        }
        if (event == Json::parse_event_t::object_start) keys_seen.push_back(0);
        break;
      case Json::parse_event_t::key: ++keys_seen.back(); break;
      case Json::parse_event_t::object_end:
        if (parsed.size() != keys_seen.back()) repeated = true;
        keys_seen.pop_back();
        break;
      case Json::parse_event_t::array_end:
      case Json::parse_event_t::value: break;
    }
    return true;
  };
  try {
    Json j = Json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    if (repeated) throw JsonError("duplicate key \"" + first_repeated_key(text) + "\"");
    return j;
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

Json parse_options_object(const std::string& text, const std::vector<std::string_view>& known,
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
