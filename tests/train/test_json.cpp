// The JSON reader/writer behind safetensors headers, checkpoint metadata and metrics logs.
#include <cmath>
#include <limits>

#include "support.h"
#include "train/json.h"

namespace ag::testing {

BOOST_AUTO_TEST_SUITE(json)

BOOST_AUTO_TEST_CASE(parses_every_kind_of_value) {
  const Json j = Json::parse(R"( {"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "x\"y\\z"}, "big": 9007199254740993} )");
  BOOST_TEST(j.is_object());
  BOOST_TEST(j.size() == 3u);
  const Json& a = j.at("a");
  BOOST_TEST(a.at(0).as_int() == 1);
  BOOST_TEST(a.at(1).as_double() == -2.5);
  BOOST_TEST(!a.at(2).is_integer());  // an exponent makes it a double
  BOOST_TEST(a.at(2).as_double() == 300.0);
  BOOST_TEST(a.at(3).as_bool());
  BOOST_TEST(!a.at(4).as_bool());
  BOOST_TEST(a.at(5).is_null());
  BOOST_TEST(j.at("b").at("c").as_string() == "x\"y\\z");
  // Integers stay exact beyond 2^53 (a double would round this one).
  BOOST_TEST(j.at("big").as_int() == 9007199254740993);
}

BOOST_AUTO_TEST_CASE(unicode_escapes_become_utf8) {
  BOOST_TEST(Json::parse(R"("\u00e9\u20ac\ud83d\ude00\n\t\/")").as_string() == "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\n\t/");
}

BOOST_AUTO_TEST_CASE(dump_round_trips_and_keeps_key_order) {
  Json j = Json::object({{"z", Json(1)}, {"a", Json(0.1)}, {"m", Json::array({Json("s"), Json(nullptr), Json(true)})}});
  j.set("q", Json(-7));
  j.set("z", Json(2));  // replaces in place
  const std::string text = j.dump();
  BOOST_TEST(text == R"({"z":2,"a":0.1,"m":["s",null,true],"q":-7})");
  BOOST_TEST((Json::parse(text) == j));
}

BOOST_AUTO_TEST_CASE(doubles_round_trip_exactly_and_stay_doubles) {
  for (double v : {0.1, 1.0 / 3.0, 2.0, -1e-300, 6.02214076e23, std::numeric_limits<double>::max()}) {
    const Json back = Json::parse(Json(v).dump());
    BOOST_TEST(!back.is_integer(), Json(v).dump());
    BOOST_TEST(back.as_double() == v);
  }
}

BOOST_AUTO_TEST_CASE(non_finite_numbers_are_written_as_null) {
  BOOST_TEST(Json(std::nan("")).dump() == "null");
  BOOST_TEST(Json(INFINITY).dump() == "null");
}

BOOST_AUTO_TEST_CASE(strings_escape_control_characters) {
  const std::string s = std::string("a\"b\\c\x01\n", 7);
  const std::string text = Json(s).dump();
  BOOST_TEST(text == "\"a\\\"b\\\\c\\u0001\\n\"");
  BOOST_TEST(Json::parse(text).as_string() == s);
}

BOOST_AUTO_TEST_CASE(rejects_malformed_text_with_the_offset) {
  AG_CHECK_THROWS_WITH(Json::parse(""), JsonError, "unexpected end");
  AG_CHECK_THROWS_WITH(Json::parse("{\"a\":1,}"), JsonError, "expected a string key", "byte 7");
  AG_CHECK_THROWS_WITH(Json::parse("[1 2]"), JsonError, "expected ',' or ']'");
  AG_CHECK_THROWS_WITH(Json::parse("{\"a\":1} x"), JsonError, "unexpected text");
  AG_CHECK_THROWS_WITH(Json::parse("01"), JsonError, "unexpected text");
  AG_CHECK_THROWS_WITH(Json::parse("+1"), JsonError, "expected a value");
  AG_CHECK_THROWS_WITH(Json::parse("NaN"), JsonError, "expected a value");
  AG_CHECK_THROWS_WITH(Json::parse("1."), JsonError, "digit after '.'");
  AG_CHECK_THROWS_WITH(Json::parse("tru"), JsonError, "invalid literal");
  AG_CHECK_THROWS_WITH(Json::parse("\"abc"), JsonError, "unterminated string");
  AG_CHECK_THROWS_WITH(Json::parse("\"a\nb\""), JsonError, "control character");
  AG_CHECK_THROWS_WITH(Json::parse("\"\\x\""), JsonError, "invalid escape");
  AG_CHECK_THROWS_WITH(Json::parse("\"\\ud800\""), JsonError, "surrogate");
  AG_CHECK_THROWS_WITH(Json::parse("{\"k\":1,\"k\":2}"), JsonError, "duplicate key \"k\"");
  AG_CHECK_THROWS_WITH(Json::parse(std::string(100, '[') + std::string(100, ']')), JsonError, "nesting deeper");
}

BOOST_AUTO_TEST_CASE(typed_access_names_the_types) {
  const Json j = Json::parse(R"({"n": 1.5, "s": "x"})");
  AG_CHECK_THROWS_WITH(j.at("n").as_int(), JsonError, "expected an integer", "got a number");
  AG_CHECK_THROWS_WITH(j.at("s").as_double(), JsonError, "expected a number", "got a string");
  AG_CHECK_THROWS_WITH(j.at("missing"), JsonError, "missing key \"missing\"");
  AG_CHECK_THROWS_WITH(j.at("s").at(0), JsonError, "expected an array");
  AG_CHECK_THROWS_WITH(Json::parse("[1]").at(1), JsonError, "index 1", "array of 1");
  BOOST_TEST(j.find("missing") == nullptr);
  AG_CHECK_THROWS_WITH(Json::object({{"a", Json(1)}, {"a", Json(2)}}), std::invalid_argument, "duplicate key \"a\"");
  AG_CHECK_THROWS_WITH(Json(std::numeric_limits<uint64_t>::max()), std::invalid_argument, "does not fit int64");
  // Any integer type is an integer (no ambiguity between int, long, long long, size_t).
  BOOST_TEST(Json(5LL).as_int() == 5);
  BOOST_TEST(Json(size_t{7}).as_int() == 7);
  BOOST_TEST(Json(static_cast<unsigned short>(9)).dump() == "9");
  BOOST_TEST(Json(std::numeric_limits<int64_t>::min()).dump() == "-9223372036854775808");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
