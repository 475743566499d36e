// JSON behind safetensors headers, checkpoint metadata and metrics logs: nlohmann-json with the
// guarantees of train/io/json_text.h (strict text, duplicate keys and deep nesting refused, exact
// integers, round-tripping doubles, non-finite numbers written as null).
#include <cmath>
#include <limits>

#include "attograd/train/io/json_text.h"
#include "support.h"

namespace ag::testing {

BOOST_AUTO_TEST_SUITE(json)

BOOST_AUTO_TEST_CASE(parses_every_kind_of_value) {
  const Json j = parse_json(R"( {"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "x\"y\\z"}, "big": 9007199254740993} )");
  BOOST_TEST(j.is_object());
  BOOST_TEST(j.size() == 3u);
  const Json& a = j.at("a");
  BOOST_TEST(json_int64(a[0]).value() == 1);
  BOOST_TEST(a[1].get<double>() == -2.5);
  BOOST_TEST(!json_int64(a[2]).has_value());  // an exponent makes it a double
  BOOST_TEST(a[2].get<double>() == 300.0);
  BOOST_TEST(a[3].get<bool>());
  BOOST_TEST(!a[4].get<bool>());
  BOOST_TEST(a[5].is_null());
  BOOST_TEST(j.at("b").at("c").get<std::string>() == "x\"y\\z");
  // Integers stay exact beyond 2^53 (a double would round this one).
  BOOST_TEST(json_int64(j.at("big")).value() == 9007199254740993);
}

BOOST_AUTO_TEST_CASE(integers_are_exact_and_int64_is_checked) {
  BOOST_TEST(json_int64(parse_json("-9223372036854775808")).value() == std::numeric_limits<int64_t>::min());
  BOOST_TEST(json_int64(parse_json("9223372036854775807")).value() == std::numeric_limits<int64_t>::max());
  // 2^63 parses exactly (as uint64) but is no int64; a fraction is no integer at all.
  BOOST_TEST(parse_json("9223372036854775808").get<uint64_t>() == 9223372036854775808ull);
  BOOST_TEST(!json_int64(parse_json("9223372036854775808")).has_value());
  BOOST_TEST(!json_int64(parse_json("1.0")).has_value());
  BOOST_TEST(!json_int64(parse_json("\"1\"")).has_value());
}

BOOST_AUTO_TEST_CASE(unicode_escapes_become_utf8) {
  BOOST_TEST(parse_json(R"("\u00e9\u20ac\ud83d\ude00\n\t\/")").get<std::string>() ==
             "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\n\t/");
}

BOOST_AUTO_TEST_CASE(dump_round_trips_and_keeps_key_order) {
  OrderedJson j = {{"z", 1}, {"a", 0.1}, {"m", {"s", nullptr, true}}};
  j["q"] = -7;
  j["z"] = 2;  // replaces in place
  const std::string text = j.dump();
  BOOST_TEST(text == R"({"z":2,"a":0.1,"m":["s",null,true],"q":-7})");
  BOOST_TEST((parse_json(text) == Json::parse(text)));
}

BOOST_AUTO_TEST_CASE(doubles_round_trip_exactly_and_stay_doubles) {
  for (double v : {0.1, 1.0 / 3.0, 2.0, -1e-300, 6.02214076e23, std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::denorm_min()}) {
    const std::string text = Json(v).dump();
    const Json back = parse_json(text);
    BOOST_TEST(!json_int64(back).has_value(), text);
    BOOST_TEST(back.get<double>() == v, text);
  }
}

BOOST_AUTO_TEST_CASE(non_finite_numbers_are_written_as_null) {
  BOOST_TEST(Json(std::nan("")).dump() == "null");
  BOOST_TEST(Json(INFINITY).dump() == "null");
  BOOST_TEST(OrderedJson({{"loss", -INFINITY}}).dump() == R"({"loss":null})");
}

BOOST_AUTO_TEST_CASE(strings_escape_control_characters) {
  const std::string s = std::string("a\"b\\c\x01\n", 7);
  const std::string text = Json(s).dump();
  BOOST_TEST(text == "\"a\\\"b\\\\c\\u0001\\n\"");
  BOOST_TEST(parse_json(text).get<std::string>() == s);
}

BOOST_AUTO_TEST_CASE(rejects_malformed_text_saying_where) {
  AG_CHECK_THROWS_WITH(parse_json(""), JsonError, "unexpected end of input");
  AG_CHECK_THROWS_WITH(parse_json("{\"a\":1,}"), JsonError, "line 1, column 8");
  AG_CHECK_THROWS_WITH(parse_json("[1 2]"), JsonError, "line 1, column 4");
  AG_CHECK_THROWS_WITH(parse_json("{\"a\":1} x"), JsonError, "column 9");
  AG_CHECK_THROWS_WITH(parse_json("01"), JsonError, "syntax error");
  AG_CHECK_THROWS_WITH(parse_json("+1"), JsonError, "syntax error");
  AG_CHECK_THROWS_WITH(parse_json("NaN"), JsonError, "syntax error");
  AG_CHECK_THROWS_WITH(parse_json("1."), JsonError, "syntax error");
  AG_CHECK_THROWS_WITH(parse_json("tru"), JsonError, "syntax error");
  AG_CHECK_THROWS_WITH(parse_json("\"abc"), JsonError, "missing closing quote");
  AG_CHECK_THROWS_WITH(parse_json("\"a\nb\""), JsonError, "control character");
  AG_CHECK_THROWS_WITH(parse_json("\"\\x\""), JsonError, "after backslash");
  AG_CHECK_THROWS_WITH(parse_json("\"\\ud800\""), JsonError, "surrogate");
  AG_CHECK_THROWS_WITH(parse_json("[1] // a comment"), JsonError, "syntax error");
  // No message keeps the library's internal exception tag.
  try {
    parse_json("[");
  } catch (const JsonError& e) {
    BOOST_TEST(std::string(e.what()).find("json.exception") == std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(duplicate_keys_are_refused_at_every_depth) {
  AG_CHECK_THROWS_WITH(parse_json("{\"k\":1,\"k\":2}"), JsonError, "duplicate key \"k\"");
  AG_CHECK_THROWS_WITH(parse_json("{\"a\":{\"k\":1,\"j\":[{\"x\":0,\"x\":1}]}}"), JsonError, "duplicate key \"x\"");
  // The same key in sibling objects is not a duplicate.
  BOOST_TEST(parse_json("[{\"k\":1},{\"k\":2}]").size() == 2u);
  BOOST_TEST(parse_json("{\"a\":{\"k\":1},\"b\":{\"k\":2},\"k\":3}").size() == 3u);
}

BOOST_AUTO_TEST_CASE(nesting_depth_is_bounded) {
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  BOOST_TEST(parse_json(ok).is_array());
  AG_CHECK_THROWS_WITH(parse_json(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']')), JsonError,
                       "nesting deeper than 64");
  // A hostile header: a million open brackets fails fast, without a deep recursion.
  AG_CHECK_THROWS_WITH(parse_json(std::string(1'000'000, '[')), JsonError, "nesting deeper");
  AG_CHECK_THROWS_WITH(parse_json(std::string(1'000'000, '{')), JsonError, "");
}

BOOST_AUTO_TEST_CASE(a_byte_order_mark_or_a_nul_byte_is_refused_by_name) {
  AG_CHECK_THROWS_WITH(parse_json("\xEF\xBB\xBF{\"a\":1}"), JsonError, "byte order mark");
  // nlohmann's lexer would stop at the NUL and accept the object before it.
  AG_CHECK_THROWS_WITH(parse_json(std::string("{\"a\":1}\0garbage", 15)), JsonError, "NUL byte at offset 7");
  AG_CHECK_THROWS_WITH(parse_json(std::string("{\"a\":1}    \0\0\0\0", 15)), JsonError, "NUL byte at offset 11");
  AG_CHECK_THROWS_WITH(count_object_keys("\xEF\xBB\xBF{}"), JsonError, "byte order mark");
  // The escaped forms are ordinary JSON.
  BOOST_TEST(parse_json(R"(["\ufeff\u0000"])")[0].get<std::string>() == std::string("\xEF\xBB\xBF\0", 4));
}

BOOST_AUTO_TEST_CASE(object_keys_are_counted_without_building_the_document) {
  BOOST_TEST(count_object_keys(R"({"a":{"x":1,"y":[{"z":2}]},"b":[],"__metadata__":{}})") == 3u);
  BOOST_TEST(count_object_keys(R"({"a":{"x":1,"y":[{"z":2}]},"b":[],"__metadata__":{}})", "__metadata__") == 2u);
  BOOST_TEST(count_object_keys("[{\"a\":1}]") == 0u);
  BOOST_TEST(count_object_keys("17") == 0u);
  AG_CHECK_THROWS_WITH(count_object_keys("{\"a\":1,}"), JsonError, "line 1, column 8");
  AG_CHECK_THROWS_WITH(count_object_keys(std::string(1'000'000, '[')), JsonError, "nesting deeper");
}

BOOST_AUTO_TEST_CASE(options_objects_name_unknown_fields) {
  BOOST_TEST(parse_options_object(R"({"a":1,"b":2})", {"a", "b", "c"}, "op: ").size() == 2u);
  AG_CHECK_THROWS_WITH(parse_options_object(R"({"a":1,"lr_max":2})", {"a"}, "op: "), std::invalid_argument, "op: ",
                       "unknown field \"lr_max\"");
  AG_CHECK_THROWS_WITH(parse_options_object("[1]", {"a"}, "op: "), std::invalid_argument, "op: ", "expected an object");
  AG_CHECK_THROWS_WITH(parse_options_object("{", {"a"}, "op: "), std::invalid_argument, "op: ", "unexpected end");
}

BOOST_AUTO_TEST_CASE(type_names_for_messages) {
  BOOST_TEST(std::string(json_type_name(parse_json("1"))) == "an integer");
  BOOST_TEST(std::string(json_type_name(parse_json("-1"))) == "an integer");
  BOOST_TEST(std::string(json_type_name(parse_json("1.5"))) == "a number");
  BOOST_TEST(std::string(json_type_name(parse_json("{}"))) == "an object");
  BOOST_TEST(std::string(json_type_name(parse_json("null"))) == "null");
}

BOOST_AUTO_TEST_SUITE_END()

// Documents of 150,000 members of every shape, in an object and in an array. Nothing is timed:
// a parser that is quadratic in the members again (as nlohmann's callback parser was for
// members that are objects) runs into the time limit of this suite's own meson test.
BOOST_AUTO_TEST_SUITE(json_large_documents)

BOOST_AUTO_TEST_CASE(members_of_every_shape_parse_in_one_pass) {
  constexpr int n = 150'000;
  for (const std::string member : {R"({"dtype":"F32","shape":[0]})", "[0,1]", "7", R"("s")"}) {
    BOOST_TEST_CONTEXT("member " << member) {
      std::string object = "{", array = "[";
      for (int i = 0; i < n; ++i) {
        object += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + member;
        array += (i ? "," : "") + member;
      }
      object += "}";
      array += "]";
      BOOST_TEST(parse_json(object).size() == static_cast<size_t>(n));
      BOOST_TEST(parse_json(array).size() == static_cast<size_t>(n));
      BOOST_TEST(count_object_keys(object) == static_cast<size_t>(n));
      // A repeated key among them is still named.
      AG_CHECK_THROWS_WITH(parse_json(object.substr(0, object.size() - 1) + ",\"k0\":" + member + "}"), JsonError,
                           "duplicate key \"k0\"");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
