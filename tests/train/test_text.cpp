// Text for the language model: the corpus (a user file or Debian's fortunes), the character and
// byte tokenizers with their JSON descriptions, the train/validation split and the batches.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "attograd/models/gpt/gpt.h"
#include "attograd/text/corpus.h"
#include "attograd/text/text_stream.h"
#include "attograd/train/io/crc32c.h"
#include "train_support.h"

namespace ag::testing {
namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::vector<int64_t> row(const Indices& x, int64_t r) {
  const int64_t t = x.shape[1];
  return std::vector<int64_t>(x.data.begin() + r * t, x.data.begin() + (r + 1) * t);
}

// Tokens whose value is their position, so a window's first token is its start.
std::vector<int64_t> positions(int64_t n) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = i;
  return t;
}

std::vector<int64_t> starts_of(const TextBatch& b) {
  std::vector<int64_t> s;
  for (int64_t r = 0; r < b.inputs.shape[0]; ++r) s.push_back(b.inputs[r * b.inputs.shape[1]]);
  return s;
}

// Every row of `b` is a window of the position stream of n tokens: consecutive inputs, targets
// shifted by one, all inside the text.
void check_windows(const TextBatch& b, int64_t rows, int64_t block, int64_t n) {
  BOOST_REQUIRE(b.inputs.shape == (Shape{rows, block}));
  BOOST_REQUIRE(b.targets.shape == (Shape{rows, block}));
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int64_t> in = row(b.inputs, r), tg = row(b.targets, r);
    BOOST_TEST(in[0] >= 0);
    BOOST_TEST(in[0] <= n - block - 1);
    for (int64_t t = 0; t < block; ++t) {
      BOOST_TEST(in[static_cast<size_t>(t)] == in[0] + t);
      BOOST_TEST(tg[static_cast<size_t>(t)] == in[static_cast<size_t>(t)] + 1);
    }
  }
}

// The UTF-8 bytes of code point `cp` (not a surrogate).
std::string utf8(uint32_t cp) {
  const auto byte = [](uint32_t v) { return static_cast<char>(v); };
  if (cp < 0x80) return std::string(1, byte(cp));
  if (cp < 0x800) return {byte(0xC0 | (cp >> 6)), byte(0x80 | (cp & 0x3F))};
  if (cp < 0x10000) return {byte(0xE0 | (cp >> 12)), byte(0x80 | ((cp >> 6) & 0x3F)), byte(0x80 | (cp & 0x3F))};
  return {byte(0xF0 | (cp >> 18)), byte(0x80 | ((cp >> 12) & 0x3F)), byte(0x80 | ((cp >> 6) & 0x3F)),
          byte(0x80 | (cp & 0x3F))};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(text)

// ---- corpus -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(default_corpus_is_the_fortunes_without_separators_index_files_or_symlinks) {
  namespace fs = std::filesystem;
  const std::string text = read_corpus("");
  BOOST_TEST(text.size() > 1000000u);
  // The .dat index files are binary (offsets with zero bytes); fortunes are text.
  BOOST_TEST(text.find('\0') == std::string::npos);
  BOOST_TEST(text.rfind("%\n", 0) != 0);
  BOOST_TEST(text.find("\n%\n") == std::string::npos);
  BOOST_TEST(!(text.size() >= 2 && text.compare(text.size() - 2, 2, "\n%") == 0));
  // The *.u8 names are symlinks to the plain files: following them would double the corpus.
  uint64_t plain_bytes = 0, plain_files = 0;
  for (const auto& e : fs::directory_iterator(kFortunesDir)) {
    const std::string name = e.path().filename().string();
    if (fs::is_regular_file(e.symlink_status()) && !name.ends_with(".dat")) {
      plain_bytes += fs::file_size(e.path());
      ++plain_files;
    }
  }
  BOOST_TEST(plain_files > 10u);
  BOOST_TEST(text.size() <= plain_bytes + plain_files);
  BOOST_TEST(text.size() > plain_bytes * 9 / 10);  // only the "%" lines went
  // Debian's corpus is UTF-8, so the character tokenizer takes it as it is.
  BOOST_TEST(Tokenizer::characters(text).vocab_size() > 90);
  BOOST_TEST(read_corpus("") == text);  // sorted order: the same corpus every time
}

BOOST_AUTO_TEST_CASE(a_user_file_is_read_byte_for_byte) {
  TempDir dir;
  // A user's file keeps its "%" lines (only the fortunes use them as separators) and any bytes
  // but NUL.
  const std::string bytes = "%\nline one\n\xff\x01tail";
  write_bytes(dir.file("corpus.txt"), bytes);
  BOOST_TEST(read_corpus(dir.file("corpus.txt")) == bytes);
  BOOST_TEST(read_corpus_sources({dir.file("corpus.txt")}).text == bytes);
}

// No text holds a NUL byte; a binary file or UTF-16 text does, and would train on garbage.
BOOST_AUTO_TEST_CASE(a_file_with_a_nul_byte_is_refused_naming_it_and_the_offset) {
  TempDir dir;
  write_bytes(dir.file("utf16.txt"), std::string("h\0i\0", 4));
  AG_CHECK_THROWS_WITH(read_corpus(dir.file("utf16.txt")), std::invalid_argument, dir.file("utf16.txt"), "NUL",
                       "offset 1", "4 bytes");
  write_bytes(dir.file("good.txt"), "good text\n");
  AG_CHECK_THROWS_WITH(read_corpus_sources({dir.file("good.txt"), dir.file("utf16.txt")}), std::invalid_argument,
                       dir.file("utf16.txt"), "NUL", "offset 1");
}

// Several files: each as it is, in the given order, a newline put between two where the first
// does not end with one (and nowhere else: not after the last, not doubled); each part
// recorded by its file name, size and checksum.
BOOST_AUTO_TEST_CASE(several_files_are_joined_in_order_with_a_newline_where_one_is_missing) {
  TempDir dir;
  write_bytes(dir.file("a.txt"), "first line\nno newline at the end");
  write_bytes(dir.file("b.txt"), "second file\n");
  write_bytes(dir.file("c.txt"), "third, unterminated");
  const Corpus corpus = read_corpus_sources({dir.file("a.txt"), dir.file("b.txt"), dir.file("c.txt")});
  BOOST_TEST(corpus.text == "first line\nno newline at the end\nsecond file\nthird, unterminated");
  BOOST_REQUIRE(corpus.parts.size() == 3u);
  BOOST_TEST(corpus.parts[0].name == "a.txt");
  BOOST_TEST(corpus.parts[1].name == "b.txt");
  BOOST_TEST(corpus.parts[2].name == "c.txt");
  BOOST_TEST(corpus.parts[0].bytes == 32);
  BOOST_TEST(corpus.parts[1].bytes == 12);
  BOOST_TEST(corpus.parts[0].crc32c == crc32c("first line\nno newline at the end", 32));
  BOOST_TEST(corpus.parts[1].crc32c == crc32c("second file\n", 12));
  // The order is the user's.
  BOOST_TEST(read_corpus_sources({dir.file("c.txt"), dir.file("b.txt")}).text == "third, unterminated\nsecond file\n");
  BOOST_TEST(read_corpus_sources({dir.file("b.txt"), dir.file("b.txt")}).text == "second file\nsecond file\n");
}

// Every bad file among good ones is refused by its own name, whichever place it has.
BOOST_AUTO_TEST_CASE(each_bad_file_among_several_is_refused_by_name) {
  TempDir dir;
  write_bytes(dir.file("good.txt"), "some text\n");
  write_bytes(dir.file("empty.txt"), "");
  const std::string good = dir.file("good.txt"), missing = dir.file("missing.txt");
  AG_CHECK_THROWS_WITH(read_corpus_sources({good, missing}), std::invalid_argument, "read_corpus", missing);
  AG_CHECK_THROWS_WITH(read_corpus_sources({missing, good}), std::invalid_argument, "read_corpus", missing);
  AG_CHECK_THROWS_WITH(read_corpus_sources({good, dir.file("empty.txt"), good}), std::invalid_argument, "read_corpus",
                       dir.file("empty.txt"), "empty");
  AG_CHECK_THROWS_WITH(read_corpus_sources({good, dir.path()}), std::invalid_argument, dir.path(), "not a regular file");
  AG_CHECK_THROWS_WITH(read_corpus_sources({good, ""}), std::invalid_argument, "empty path");
}

// The named corpora: no sources is the fortunes, "fortunes" too; a path is never a name.
BOOST_AUTO_TEST_CASE(named_corpora_are_known_by_name_and_the_fortunes_are_the_default) {
  BOOST_TEST(is_corpus_name("fortunes"));
  BOOST_TEST(is_corpus_name("bible"));
  BOOST_TEST(!is_corpus_name("./bible"));
  BOOST_TEST(!is_corpus_name("bible.txt"));
  BOOST_TEST(!is_corpus_name("/usr/share/games/fortunes"));
  const Corpus fortunes = read_corpus_sources({});
  BOOST_TEST(fortunes.text == read_corpus(""));
  BOOST_REQUIRE(fortunes.parts.size() == 1u);
  BOOST_TEST(fortunes.parts[0].name == "fortunes");
  BOOST_TEST(fortunes.parts[0].bytes == static_cast<int64_t>(fortunes.text.size()));
  BOOST_TEST(read_corpus_sources({"fortunes"}).text == fortunes.text);
}

// Debian's King James Bible (bible-kjv-text, read through its program `bible`): its 31,102
// verses one a line, the references left out, plain ASCII.
BOOST_AUTO_TEST_CASE(the_bible_corpus_is_every_verse_one_a_line_without_references) {
  const Corpus bible = read_corpus_sources({"bible"});
  const std::string& text = bible.text;
  BOOST_TEST(text.rfind("In the beginning God created the heaven and the earth.\nAnd the earth was without form", 0) == 0u);
  BOOST_TEST(text.ends_with("The grace of our Lord Jesus Christ be with you all. Amen.\n"));
  BOOST_TEST(std::count(text.begin(), text.end(), '\n') == 31102);
  BOOST_TEST(text.find("Ge1:1") == std::string::npos);
  BOOST_TEST(text.find("\n\n") == std::string::npos);
  BOOST_TEST(std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 128; }));
  BOOST_REQUIRE(bible.parts.size() == 1u);
  BOOST_TEST(bible.parts[0].name == "bible");
  BOOST_TEST(bible.parts[0].bytes == static_cast<int64_t>(text.size()));
  BOOST_TEST(read_corpus_sources({"bible"}).parts[0].crc32c == bible.parts[0].crc32c);  // the same text every time
  // With a file after it: the bible's text ends with its newline, so none is added.
  TempDir dir;
  write_bytes(dir.file("more.txt"), "more");
  BOOST_TEST(read_corpus_sources({"bible", dir.file("more.txt")}).text == text + "more");
}

BOOST_AUTO_TEST_CASE(missing_directory_and_empty_files_are_errors_naming_the_path) {
  TempDir dir;
  const std::string missing = dir.file("no-such-corpus.txt");
  AG_CHECK_THROWS_WITH(read_corpus(missing), std::invalid_argument, "read_corpus", missing);
  AG_CHECK_THROWS_WITH(read_corpus(dir.path()), std::invalid_argument, "read_corpus", dir.path(), "not a regular file");
  write_bytes(dir.file("empty.txt"), "");
  AG_CHECK_THROWS_WITH(read_corpus(dir.file("empty.txt")), std::invalid_argument, "read_corpus", dir.file("empty.txt"),
                       "empty");
}

// ---- character tokenizer ------------------------------------------------------------------

// What bits per byte divides by: a character token's UTF-8 length, a byte token's 1.
// generate prints a byte-level model's tokens as they come: a character split over two tokens
// is printed whole once complete, bytes no text holds become U+FFFD, the output is always UTF-8.
BOOST_AUTO_TEST_CASE(the_utf8_printer_joins_split_characters_and_replaces_stray_bytes) {
  Utf8Printer p;
  BOOST_TEST(p.push("ab") == "ab");
  BOOST_TEST(p.push("\xC3") == "");           // the first byte of e-acute: held back
  BOOST_TEST(p.push("\xA9 x") == "\xC3\xA9 x");  // completed by the next token
  BOOST_TEST(p.push("\xE2\x82") == "");       // two of the euro sign's three bytes
  BOOST_TEST(p.push("\xAC") == "\xE2\x82\xAC");
  BOOST_TEST(p.push("\x80y") == "\xEF\xBF\xBDy");  // a continuation byte with no lead
  BOOST_TEST(p.push("\xFF") == "\xEF\xBF\xBD");     // never in UTF-8
  BOOST_TEST(p.push("\xC3z") == "\xEF\xBF\xBDz");   // a lead byte whose character never came
  BOOST_TEST(p.push("\xF0\x9F") == "");
  BOOST_TEST(p.finish() == "\xEF\xBF\xBD\xEF\xBF\xBD");  // cut off by the end: one U+FFFD a byte
  BOOST_TEST(p.finish() == "");
}

BOOST_AUTO_TEST_CASE(token_bytes_are_each_ids_utf8_length) {
  const Tokenizer chars = Tokenizer::characters("a\xC3\xA9\xE2\x9C\x93\xF0\x9F\x98\x80 ");  // "aé✓😀 "
  BOOST_TEST(chars.token_bytes() == (std::vector<int64_t>{1, 1, 2, 3, 4}), boost::test_tools::per_element());
  for (int64_t id = 0; id < chars.vocab_size(); ++id) {
    BOOST_TEST(chars.token_bytes()[static_cast<size_t>(id)] == static_cast<int64_t>(chars.decode(id).size()));
  }
  const std::vector<int64_t> bytes = Tokenizer::bytes().token_bytes();
  BOOST_TEST(bytes.size() == 256u);
  BOOST_TEST(std::count(bytes.begin(), bytes.end(), 1) == 256);
}

BOOST_AUTO_TEST_CASE(characters_are_utf8_code_points_sorted_by_bytes) {
  const std::string text = "h\xC3\xA9llo \xE2\x9C\x93";  // "héllo ✓"
  const Tokenizer tok = Tokenizer::characters(text);
  BOOST_TEST(std::string(tok.kind_name()) == "char");
  BOOST_TEST(std::string(tok.kind_name()) == "char");
  BOOST_TEST(tok.vocab_size() == 6);
  const std::vector<std::string> expected = {" ", "h", "l", "o", "\xC3\xA9", "\xE2\x9C\x93"};
  for (size_t i = 0; i < expected.size(); ++i) BOOST_TEST(tok.decode(static_cast<int64_t>(i)) == expected[i]);
  const std::vector<int64_t> ids = tok.encode(text);
  BOOST_TEST(ids == (std::vector<int64_t>{1, 4, 2, 2, 3, 0, 5}));
  BOOST_TEST(tok.decode(ids) == text);
}

BOOST_AUTO_TEST_CASE(four_byte_characters_and_control_characters_round_trip) {
  const std::string text = "a\n\t\xF0\x9F\x98\x80z\xC2\x80\xF4\x8F\xBF\xBF\xEF\xBF\xBF" + std::string(1, '\0');
  const Tokenizer tok = Tokenizer::characters(text);
  BOOST_TEST(tok.vocab_size() == 9);
  BOOST_TEST(tok.decode(tok.encode(text)) == text);
  BOOST_TEST(tok.decode(0) == std::string(1, '\0'));
  BOOST_TEST(tok.decode(8) == "\xF4\x8F\xBF\xBF");  // U+10FFFF, the largest code point, sorts last
}

BOOST_AUTO_TEST_CASE(the_table_is_the_text_s_distinct_characters_in_byte_order) {
  // ASCII, Latin, Greek, 6,000 CJK ideographs (past the 4,096 at which the table was once
  // re-sorted after every character), Hangul and emoji, each drawn several times, shuffled.
  std::vector<uint32_t> pool;
  for (uint32_t cp = 0x20; cp < 0x7F; ++cp) pool.push_back(cp);
  for (uint32_t cp = 0xC0; cp < 0x180; ++cp) pool.push_back(cp);
  for (uint32_t cp = 0x391; cp < 0x3CA; ++cp) pool.push_back(cp);
  for (uint32_t cp = 0x4E00; cp < 0x4E00 + 6000; ++cp) pool.push_back(cp);
  for (uint32_t cp = 0xAC00; cp < 0xAC00 + 500; ++cp) pool.push_back(cp);
  for (uint32_t cp = 0x1F600; cp < 0x1F650; ++cp) pool.push_back(cp);
  std::mt19937 rng(27);
  std::string text;
  for (int i = 0; i < 40'000; ++i) text += utf8(pool[rng() % pool.size()]);
  text += "\n";

  // The table built the obvious way: every character (its UTF-8 bytes) into a sorted set; the
  // id of a character is its position.
  std::set<std::string> reference;
  for (size_t pos = 0; pos < text.size();) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    const size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    reference.insert(text.substr(pos, length));
    pos += length;
  }
  BOOST_REQUIRE(reference.size() > 4096 + 128);

  const Tokenizer tok = Tokenizer::characters(text);
  BOOST_REQUIRE(tok.vocab_size() == static_cast<int64_t>(reference.size()));
  int64_t id = 0;
  for (const std::string& symbol : reference) {
    if (tok.decode(id) != symbol) {
      BOOST_TEST(tok.decode(id) == symbol, "id " << id);
      break;
    }
    ++id;
  }
  BOOST_TEST(tok.decode(tok.encode(text)) == text);
}

BOOST_AUTO_TEST_CASE(a_text_past_the_vocabulary_limit_reaches_the_limit_s_error) {
  // Every code point once: 1,112,064 characters, more than a model's 2^20 vocabulary. The table
  // is built (in one pass), and the model options it leads to are refused by their own check.
  std::string text;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp < 0xD800 || cp > 0xDFFF) text += utf8(cp);
  }
  const Tokenizer tok = Tokenizer::characters(text);
  BOOST_TEST(tok.vocab_size() == 1'112'064);
  BOOST_TEST(tok.decode(tok.vocab_size() - 1) == utf8(0x10FFFF));
  GPTOptions model{.vocab = tok.vocab_size(), .block_size = 8, .d_model = 8, .n_head = 1, .n_layers = 1};
  AG_CHECK_THROWS_WITH(validate(model), std::invalid_argument, "vocab", "1112064");
}

BOOST_AUTO_TEST_CASE(invalid_utf8_is_an_error_naming_the_byte_offset) {
  const std::vector<std::pair<std::string, size_t>> cases = {
      {"ab\xC3", 2},              // truncated by the end
      {"a\xC3(", 1},              // missing continuation
      {"a\xC0\xAF", 1},           // overlong '/'
      {"\xE0\x80\xAF", 0},        // overlong, three bytes
      {"xyz\xF0\x80\x80\xAF", 3}, // overlong, four bytes
      {"xx\xED\xA0\x80", 2},      // UTF-16 surrogate U+D800
      {"\xF4\x90\x80\x80", 0},    // above U+10FFFF
      {"ok\x80", 2},              // lone continuation byte
      {"\xFF", 0},                // never in UTF-8
  };
  for (const auto& [text, offset] : cases) {
    AG_CHECK_THROWS_WITH(Tokenizer::characters(text), std::invalid_argument, "Tokenizer::characters",
                         "byte offset " + std::to_string(offset) + " ", "byte-level tokenizer");
  }
  AG_CHECK_THROWS_WITH(Tokenizer::characters(""), std::invalid_argument, "Tokenizer::characters", "empty");
  const Tokenizer tok = Tokenizer::characters("abc");
  AG_CHECK_THROWS_WITH(tok.encode("ab\xC3"), std::invalid_argument, "Tokenizer::encode", "byte offset 2");
}

BOOST_AUTO_TEST_CASE(unknown_characters_are_named_with_their_offset) {
  const Tokenizer tok = Tokenizer::characters("abc");
  AG_CHECK_THROWS_WITH(tok.encode("ab\xC3\xA9"), std::invalid_argument, "Tokenizer::encode",
                       "the text has a character the tokenizer does not know", "'\xC3\xA9'", "U+00E9", "byte offset 2",
                       "knows only the 3 characters of the text it was built from");
  AG_CHECK_THROWS_WITH(tok.encode("cab\n"), std::invalid_argument, "'\\n'", "U+000A", "byte offset 3");
  AG_CHECK_THROWS_WITH(tok.encode("x"), std::invalid_argument, "'x'", "byte offset 0");
  AG_CHECK_THROWS_WITH(tok.encode(std::string("a\x01", 2)), std::invalid_argument, "U+0001", "byte offset 1");
  BOOST_TEST(tok.encode("").empty());
}

BOOST_AUTO_TEST_CASE(decode_refuses_ids_outside_the_vocabulary) {
  const Tokenizer chars = Tokenizer::characters("abc");
  AG_CHECK_THROWS_WITH(chars.decode(3), std::invalid_argument, "Tokenizer::decode", "id 3", "[0, 3)");
  AG_CHECK_THROWS_WITH(chars.decode(-1), std::invalid_argument, "id -1");
  AG_CHECK_THROWS_WITH(chars.decode(std::vector<int64_t>{0, 7}), std::invalid_argument, "id 7");
  AG_CHECK_THROWS_WITH(Tokenizer::bytes().decode(256), std::invalid_argument, "id 256", "[0, 256)");
  AG_CHECK_THROWS_WITH(Tokenizer::bytes().decode(-1), std::invalid_argument, "id -1");
}

// ---- byte tokenizer -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(bytes_round_trip_any_bytes) {
  const Tokenizer tok = Tokenizer::bytes();
  BOOST_TEST(std::string(tok.kind_name()) == "byte");
  BOOST_TEST(std::string(tok.kind_name()) == "byte");
  BOOST_TEST(tok.vocab_size() == 256);
  std::string all;
  for (int b = 255; b >= 0; --b) all += static_cast<char>(b);
  all += "\xC3(\xED\xA0\x80";  // not UTF-8, which is why the byte tokenizer exists
  const std::vector<int64_t> ids = tok.encode(all);
  BOOST_TEST(ids.size() == all.size());
  BOOST_TEST(ids[0] == 255);
  BOOST_TEST(ids[255] == 0);
  BOOST_TEST(tok.decode(ids) == all);
}

// ---- JSON description ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(json_round_trips_both_kinds) {
  const std::string text = "h\xC3\xA9llo\n\"\\\t \xE2\x9C\x93" + std::string(1, '\0');
  const Tokenizer chars = Tokenizer::characters(text);
  const std::string json = chars.to_json();
  BOOST_TEST(json.find("\"kind\":\"char\"") != std::string::npos);
  BOOST_TEST(json.find("\xE2\x9C\x93") != std::string::npos);  // readable: the characters themselves
  const Tokenizer back = Tokenizer::from_json(json);
  BOOST_TEST(std::string(back.kind_name()) == "char");
  BOOST_TEST(back.vocab_size() == chars.vocab_size());
  for (int64_t i = 0; i < chars.vocab_size(); ++i) BOOST_TEST(back.decode(i) == chars.decode(i));
  BOOST_TEST(back.encode(text) == chars.encode(text));
  BOOST_TEST(back.to_json() == json);

  const Tokenizer bytes = Tokenizer::bytes();
  BOOST_TEST(bytes.to_json() == "{\"kind\":\"byte\"}");
  BOOST_TEST(std::string(Tokenizer::from_json(bytes.to_json()).kind_name()) == "byte");
  BOOST_TEST(Tokenizer::from_json(bytes.to_json()).vocab_size() == 256);
}

// A kind of tokenizer added from outside, as a user adds one: the ten digits. Tokenizer, its
// JSON description, the registry and the chunked encoder take it without any change to the
// built-in kinds.
struct DigitTokens final : TokenizerKind {
  const char* name() const override { return "digits"; }
  int64_t vocab_size() const override { return 10; }
  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> ids;
    for (const char c : text) {
      if (c < '0' || c > '9') throw std::invalid_argument("digits: '" + std::string(1, c) + "' is no digit");
      ids.push_back(c - '0');
    }
    return ids;
  }
  std::string token(int64_t id) const override { return std::string(1, static_cast<char>('0' + id)); }
  std::string to_json() const override { return R"({"kind":"digits"})"; }
  size_t last_safe_cut(std::string_view text, size_t) const override { return text.size() < 2 ? 0 : text.size() - 1; }
};

BOOST_AUTO_TEST_CASE(a_kind_of_tokenizer_is_added_from_outside) {
  AG_CHECK_THROWS_WITH(Tokenizer::from_json(R"({"kind":"digits"})"), std::invalid_argument, "unknown \"kind\" \"digits\"",
                       "\"bpe\", \"byte\", \"char\"");
  register_tokenizer_kind("digits", [](const std::string&) { return std::make_shared<const DigitTokens>(); });
  const Tokenizer digits(std::make_shared<const DigitTokens>());
  BOOST_TEST(std::string(digits.kind_name()) == "digits");
  BOOST_TEST(digits.encode("2026") == (std::vector<int64_t>{2, 0, 2, 6}), boost::test_tools::per_element());
  BOOST_TEST(digits.decode(std::vector<int64_t>{1, 9}) == "19");
  BOOST_TEST(digits.token_bytes() == std::vector<int64_t>(10, 1), boost::test_tools::per_element());
  AG_CHECK_THROWS_WITH(digits.decode(10), std::invalid_argument, "id 10", "digits tokenizer");
  const Tokenizer back = Tokenizer::from_json(digits.to_json());
  BOOST_TEST(back.encode("7") == std::vector<int64_t>{7}, boost::test_tools::per_element());
  BOOST_TEST(describe_tokenizer(back).find("digits tokenizer of 10 ids") == 0u);
  ChunkedEncoder enc(back, 3);
  std::vector<int64_t> ids;
  enc.push("31415926", ids);
  enc.finish(ids);
  BOOST_TEST(ids == (std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6}), boost::test_tools::per_element());
  AG_CHECK_THROWS_WITH(back.byte_pairs(), std::logic_error, "digits tokenizer has no byte pairs");
  // A name is registered once, and the built-in ones are taken.
  for (const char* taken : {"digits", "char", "byte", "bpe", "hf_bpe"}) {
    AG_CHECK_THROWS_WITH(register_tokenizer_kind(taken, [](const std::string&) { return std::make_shared<const DigitTokens>(); }),
                         std::invalid_argument, "registered already");
  }
  BOOST_TEST(tokenizer_kind_names() == (std::vector<std::string>{"bpe", "byte", "char", "digits", "hf_bpe"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bad_json_descriptions_say_what_is_wrong) {
  const std::string op = "Tokenizer::from_json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", op},
      {"[]", "expected an object"},
      {R"({"symbols":["a"]})", "missing \"kind\""},
      {R"({"kind":3})", "\"kind\" must be a string"},
      {R"({"kind":"word"})", "unknown \"kind\" \"word\""},
      {R"({"kind":"char"})", "needs \"symbols\""},
      {R"({"kind":"char","symbols":"ab"})", "must be an array"},
      {R"({"kind":"char","symbols":[]})", "\"symbols\" is empty"},
      {R"({"kind":"char","symbols":["a",1]})", "symbol 1 must be a string"},
      {R"({"kind":"char","symbols":["a","bc"]})", "symbol 1 must be exactly one UTF-8 character"},
      {R"({"kind":"char","symbols":["a",""]})", "symbol 1 must be exactly one UTF-8 character"},
      {R"({"kind":"char","symbols":["a","b","b"]})", "symbol 2 \"b\" appears twice"},
      {R"({"kind":"char","symbols":["b","a"]})", "symbol 1 \"a\" is out of order"},
      {R"({"kind":"char","symbols":["\ud800"]})", op},  // a lone surrogate is no character
      {R"({"kind":"byte","symbols":["a"]})", "byte tokenizer has no \"symbols\""},
      {R"({"kind":"char","symbols":["a"],"extra":1})", "unknown field \"extra\""},
  };
  for (const auto& [json, part] : cases) {
    AG_CHECK_THROWS_WITH(Tokenizer::from_json(json), std::invalid_argument, op, part);
  }
}

// ---- split and batches --------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(split_cuts_at_the_floor_of_the_fraction) {
  const std::vector<int64_t> tokens = positions(10);
  const TextSplit a = split_tokens(tokens, 0.9);
  BOOST_TEST(a.train == positions(9));
  BOOST_TEST(a.val == (std::vector<int64_t>{9}));
  const TextSplit b = split_tokens(tokens, 0.25);  // 2.5 -> 2
  BOOST_TEST(b.train == (std::vector<int64_t>{0, 1}));
  BOOST_TEST(b.val.size() == 8u);
  BOOST_TEST(b.val.front() == 2);
  for (double bad : {0.0, 1.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    AG_CHECK_THROWS_WITH(split_tokens(tokens, bad), std::invalid_argument, "split_tokens", "train_fraction");
  }
}

BOOST_AUTO_TEST_CASE(sample_batch_is_a_pure_function_of_seed_and_step) {
  const std::vector<int64_t> tokens = positions(1000);
  const TextBatchOptions o{.batch = 8, .block_size = 16};
  const TextBatch a = sample_batch(tokens, o, 7, 3);
  const TextBatch again = sample_batch(tokens, o, 7, 3);
  check_windows(a, 8, 16, 1000);
  BOOST_TEST(a.inputs.data == again.inputs.data);
  BOOST_TEST(a.targets.data == again.targets.data);
  BOOST_TEST(starts_of(a) != starts_of(sample_batch(tokens, o, 7, 4)));
  BOOST_TEST(starts_of(a) != starts_of(sample_batch(tokens, o, 8, 3)));
  // The windows of a batch differ from one another (b is part of the counter).
  const std::vector<int64_t> s = starts_of(a);
  BOOST_TEST(std::set<int64_t>(s.begin(), s.end()).size() > 4u);
  // Window b does not depend on how many windows the batch has.
  const TextBatch wider = sample_batch(tokens, {.batch = 12, .block_size = 16}, 7, 3);
  const std::vector<int64_t> w = starts_of(wider);
  BOOST_TEST(std::vector<int64_t>(w.begin(), w.begin() + 8) == s);
}

BOOST_AUTO_TEST_CASE(sample_batch_windows_come_from_the_token_stream) {
  // Tokens that are not their positions: each window must be a run of the stream.
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < 300; ++i) tokens.push_back((i * 37 + 11) % 101);
  const TextBatch b = sample_batch(tokens, {.batch = 6, .block_size = 20}, 1, 0);
  for (int64_t r = 0; r < 6; ++r) {
    const std::vector<int64_t> in = row(b.inputs, r), tg = row(b.targets, r);
    bool found = false;
    for (size_t start = 0; start + 21 <= tokens.size() && !found; ++start) {
      found = std::equal(in.begin(), in.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start)) &&
              std::equal(tg.begin(), tg.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start) + 1);
    }
    BOOST_TEST(found, "window " << r << " is not a run of the tokens");
  }
}

BOOST_AUTO_TEST_CASE(sample_batch_starts_cover_the_whole_range_evenly) {
  // n = block_size + 10: ten possible starts, 0 through n - block_size - 1, both ends included.
  const int64_t block = 5, n = block + 10;
  const std::vector<int64_t> tokens = positions(n);
  std::map<int64_t, int> counts;
  for (int64_t step = 0; step < 1000; ++step) {
    const TextBatch b = sample_batch(tokens, {.batch = 10, .block_size = block}, 42, step);
    check_windows(b, 10, block, n);
    for (int64_t s : starts_of(b)) ++counts[s];
  }
  BOOST_TEST(counts.size() == 10u);
  BOOST_TEST(counts.begin()->first == 0);
  BOOST_TEST(counts.rbegin()->first == n - block - 1);
  for (const auto& [start, count] : counts) BOOST_TEST((count > 850 && count < 1150), "start " << start << ": " << count);
  // The shortest text that holds a window has one start only.
  const TextBatch one = sample_batch(positions(block + 1), {.batch = 3, .block_size = block}, 0, 0);
  BOOST_TEST(starts_of(one) == (std::vector<int64_t>{0, 0, 0}));
}

BOOST_AUTO_TEST_CASE(sample_batch_errors_name_the_numbers) {
  const std::vector<int64_t> tokens = positions(5);
  AG_CHECK_THROWS_WITH(sample_batch(tokens, {.batch = 2, .block_size = 5}, 0, 0), std::invalid_argument, "sample_batch",
                       "5 tokens", "block_size + 1 = 6", "block-size");
  AG_CHECK_THROWS_WITH(sample_batch(tokens, {.batch = 0, .block_size = 2}, 0, 0), std::invalid_argument, "batch", "got 0");
  AG_CHECK_THROWS_WITH(sample_batch(tokens, {.batch = 1, .block_size = 0}, 0, 0), std::invalid_argument, "block_size",
                       "got 0");
  AG_CHECK_THROWS_WITH(sample_batch(tokens, {.batch = 1, .block_size = 2}, 0, -1), std::invalid_argument, "step", "-1");
}

BOOST_AUTO_TEST_CASE(eval_batches_are_evenly_spaced_whole_batches) {
  const int64_t n = 100, block = 10;
  const std::vector<int64_t> tokens = positions(n);
  const TextBatchOptions o{.batch = 4, .block_size = block};
  // 10 windows asked, rounded down to 8 (two whole batches), starts floor(i * 89 / 7).
  const std::vector<TextBatch> batches = eval_batches(tokens, o, 10);
  BOOST_REQUIRE(batches.size() == 2u);
  check_windows(batches[0], 4, block, n);
  check_windows(batches[1], 4, block, n);
  BOOST_TEST(starts_of(batches[0]) == (std::vector<int64_t>{0, 12, 25, 38}));
  BOOST_TEST(starts_of(batches[1]) == (std::vector<int64_t>{50, 63, 76, 89}));
  const std::vector<TextBatch> again = eval_batches(tokens, o, 10);
  for (size_t i = 0; i < 2; ++i) {
    BOOST_TEST(again[i].inputs.data == batches[i].inputs.data);
    BOOST_TEST(again[i].targets.data == batches[i].targets.data);
  }
  // More windows asked than the text holds: every start once.
  const std::vector<TextBatch> all = eval_batches(positions(block + 8), o, 1000);
  BOOST_REQUIRE(all.size() == 2u);
  BOOST_TEST(starts_of(all[0]) == (std::vector<int64_t>{0, 1, 2, 3}));
  BOOST_TEST(starts_of(all[1]) == (std::vector<int64_t>{4, 5, 6, 7}));
  // Text for fewer windows than one batch: a single smaller batch.
  const std::vector<TextBatch> few = eval_batches(positions(block + 2), o, 10);
  BOOST_REQUIRE(few.size() == 1u);
  check_windows(few[0], 2, block, block + 2);
  BOOST_TEST(starts_of(few[0]) == (std::vector<int64_t>{0, 1}));
  // One window asked: the start of the text.
  const std::vector<TextBatch> single = eval_batches(tokens, {.batch = 1, .block_size = block}, 1);
  BOOST_REQUIRE(single.size() == 1u);
  BOOST_TEST(starts_of(single[0]) == (std::vector<int64_t>{0}));
}

// 100 tokens in windows of 10: nine windows (the tenth would need token 100 as a target), at
// 0, 10, ..., 80, in batches of 4, 4 and 1; each token from 1 to 90 is a target exactly once.
BOOST_AUTO_TEST_CASE(tiled_batches_cover_the_text_once_in_non_overlapping_windows) {
  const int64_t n = 100, block = 10;
  const std::vector<TextBatch> batches = tiled_batches(positions(n), {.batch = 4, .block_size = block});
  BOOST_REQUIRE(batches.size() == 3u);
  check_windows(batches[0], 4, block, n);
  check_windows(batches[2], 1, block, n);
  BOOST_TEST(starts_of(batches[0]) == (std::vector<int64_t>{0, 10, 20, 30}));
  BOOST_TEST(starts_of(batches[1]) == (std::vector<int64_t>{40, 50, 60, 70}));
  BOOST_TEST(starts_of(batches[2]) == (std::vector<int64_t>{80}));
  std::vector<int64_t> targets;
  for (const TextBatch& b : batches) targets.insert(targets.end(), b.targets.data.begin(), b.targets.data.end());
  std::vector<int64_t> want(90);
  std::iota(want.begin(), want.end(), 1);
  BOOST_TEST(targets == want);
  // One token more and the tenth window fits.
  BOOST_TEST(tiled_batches(positions(n + 1), {.batch = 5, .block_size = block}).size() == 2u);
  AG_CHECK_THROWS_WITH(tiled_batches(positions(8), {.batch = 2, .block_size = 8}), std::invalid_argument,
                       "tiled_batches", "8 tokens", "block_size + 1 = 9");
}

BOOST_AUTO_TEST_CASE(eval_batches_errors_name_the_numbers) {
  AG_CHECK_THROWS_WITH(eval_batches(positions(8), {.batch = 2, .block_size = 8}, 4), std::invalid_argument, "eval_batches",
                       "8 tokens", "block_size + 1 = 9");
  AG_CHECK_THROWS_WITH(eval_batches(positions(50), {.batch = 2, .block_size = 8}, 0), std::invalid_argument, "max_windows",
                       "got 0");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
