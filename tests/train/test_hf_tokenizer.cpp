// Hugging Face tokenizer.json (text/hf_tokenizer.h): small files made here, each checking one rule
// of the format (merges in both forms, ignore_merges, added tokens and their flags, NFC, invalid
// UTF-8), the description's round trip, and every malformed or unsupported file refused with an
// error naming the file and the field. The real files against the reference encoder are
// tests/data/hf_tokenizers_match_the_reference.sh.
#include <fstream>

#include <nlohmann/json.hpp>

#include "attograd/text/hf_tokenizer.h"
#include "train_support.h"

namespace ag::testing {
namespace {

using nlohmann::json;

// A small byte-level BPE as a tokenizer.json: trained on a line of text, with one special.
json small_file() {
  const BytePairEncoding bpe = train_bpe({{.name = "text.txt", .text = "the cat sat on the mat, the hat, the end"}},
                                         {.vocab_size = 270, .specials = {"<|endoftext|>"}});
  return json::parse(hf_tokenizer_json(bpe));
}

std::vector<int64_t> ids_of(const json& file, const std::string& text) { return hf_tokenizer_from_json(file.dump(), "test").encode(text); }

// The id of a token of the file, by its text.
int64_t id(const json& file, const std::string& token) { return file["model"]["vocab"][token].get<int64_t>(); }

void add_token(json& file, const std::string& token) {
  int64_t next = 0;
  for (const auto& [text, i] : file["model"]["vocab"].items()) next = std::max(next, i.get<int64_t>() + 1);
  for (const json& a : file["added_tokens"]) next = std::max(next, a["id"].get<int64_t>() + 1);
  file["model"]["vocab"][token] = next;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hf_tokenizer)

BOOST_AUTO_TEST_CASE(a_trained_vocabulary_written_as_tokenizer_json_gives_the_same_ids) {
  const BytePairEncoding bpe = train_bpe({{.name = "text.txt", .text = "the cat sat on the mat, the hat, the end"}},
                                         {.vocab_size = 270, .specials = {"<|endoftext|>"}});
  const Tokenizer hf = hf_tokenizer_from_json(hf_tokenizer_json(bpe), "test");
  BOOST_TEST(hf.vocab_size() == bpe.vocab_size());
  for (const std::string text : {"the cat sat on the mat", "that hat<|endoftext|>the end", "théâtre 123 \n\n  x"}) {
    BOOST_TEST(hf.encode(text) == bpe.encode(text));
    BOOST_TEST(hf.decode(hf.encode(text)) == text);
  }
}

BOOST_AUTO_TEST_CASE(merges_as_strings_and_as_pairs_read_the_same) {
  json pairs = small_file(), strings = small_file();
  for (json& m : strings["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  BOOST_TEST(ids_of(pairs, "the cat sat on the mat") == ids_of(strings, "the cat sat on the mat"));
  BOOST_TEST(ids_of(strings, "the cat").size() < 7u);  // the merges apply
}

// Llama 3's ignore_merges: a chunk that is a token of the vocabulary is that token, even where the
// merges would not make it.
BOOST_AUTO_TEST_CASE(ignore_merges_takes_a_chunk_that_is_a_token_whole) {
  json file = small_file();
  add_token(file, "xyz");  // no merge makes it
  const std::vector<int64_t> merged = ids_of(file, "xyz");
  BOOST_TEST(merged.size() == 3u);
  file["model"]["ignore_merges"] = true;
  BOOST_TEST(ids_of(file, "xyz") == std::vector<int64_t>{id(file, "xyz")});
  BOOST_TEST(ids_of(file, "xy") == std::vector<int64_t>(merged.begin(), merged.begin() + 2));
}

BOOST_AUTO_TEST_CASE(added_tokens_are_found_first_the_longest_at_a_place) {
  json file = small_file();
  const int64_t eot = file["added_tokens"][0]["id"].get<int64_t>();
  file["added_tokens"].push_back({{"id", eot + 1}, {"content", "<|end"}, {"special", true}});
  const Tokenizer t = hf_tokenizer_from_json(file.dump(), "test");
  const std::vector<int64_t> ids = t.encode("a<|endoftext|>b<|end");
  BOOST_TEST(ids.size() == 4u);
  BOOST_TEST(ids[1] == eot);
  BOOST_TEST(ids[3] == eot + 1);
  BOOST_TEST(t.decode(ids) == "a<|endoftext|>b<|end");
}

BOOST_AUTO_TEST_CASE(lstrip_and_rstrip_take_the_whitespace_beside_the_token) {
  json file = small_file();
  const std::vector<int64_t> plain = ids_of(file, "a \t<|endoftext|>  b");
  file["added_tokens"][0]["lstrip"] = true;
  file["added_tokens"][0]["rstrip"] = true;
  const std::vector<int64_t> stripped = ids_of(file, "a \t<|endoftext|>  b");
  BOOST_TEST(stripped == ids_of(file, "a<|endoftext|>b"));
  BOOST_TEST(stripped.size() < plain.size());
}

// The reference takes strings: its callers' bytes become one with U+FFFD for each maximal invalid
// subsequence, and ours does the same.
BOOST_AUTO_TEST_CASE(invalid_utf8_becomes_one_replacement_character_per_maximal_subpart) {
  const Tokenizer t = hf_tokenizer_from_json(small_file().dump(), "test");
  const std::string fffd = "\xEF\xBF\xBD";
  BOOST_TEST(t.encode("a\xFF" "b") == t.encode("a" + fffd + "b"));
  BOOST_TEST(t.encode("a\xE2\x82" "b") == t.encode("a" + fffd + "b"));          // a truncated character: one
  BOOST_TEST(t.encode("a\xE0\x80" "b") == t.encode("a" + fffd + fffd + "b"));   // an overlong lead: two
  BOOST_TEST(t.encode("\xF0\x9F\x98") == t.encode(fffd));
  BOOST_TEST(t.encode("\xED\xA0\x80") == t.encode(fffd + fffd + fffd));        // a surrogate: three
  BOOST_TEST(t.decode(t.encode("x\xC3")) == "x" + fffd);
}

BOOST_AUTO_TEST_CASE(an_nfc_normalizer_composes_before_splitting) {
  json file = small_file();
  const std::string decomposed = "e\xCC\x81", composed = "\xC3\xA9";  // e + U+0301, U+00E9
  BOOST_TEST(ids_of(file, decomposed) != ids_of(file, composed));
  file["normalizer"] = {{"type", "NFC"}};
  BOOST_TEST(ids_of(file, decomposed) == ids_of(file, composed));
  BOOST_TEST(ids_of(file, "A\xCC\x8A<|endoftext|>") == ids_of(file, "\xC3\x85<|endoftext|>"));
}

BOOST_AUTO_TEST_CASE(the_description_reads_back_the_same_tokenizer) {
  json file = small_file();
  file["model"]["ignore_merges"] = true;
  file["normalizer"] = {{"type", "NFC"}};
  const Tokenizer t = hf_tokenizer_from_json(file.dump(), "test");
  const Tokenizer again = Tokenizer::from_json(t.to_json());
  BOOST_TEST(std::string(again.kind_name()) == "hf_bpe");
  BOOST_TEST(again.to_json() == t.to_json());
  const std::string text = "the cat<|endoftext|> sat e\xCC\x81 \xFF";
  BOOST_TEST(again.encode(text) == t.encode(text));
}

// What export_gpt writes as a model's tokenizer.json: an hf_bpe tokenizer's file without the
// description's "kind", which reads back as the same tokenizer; a bpe one's as hf_tokenizer_json.
BOOST_AUTO_TEST_CASE(a_tokenizer_json_file_is_written_for_both_byte_pair_kinds_only) {
  json file = small_file();
  file["normalizer"] = {{"type", "NFC"}};
  const Tokenizer t = hf_tokenizer_from_json(file.dump(), "test");
  const std::string written = tokenizer_json_file(t);
  BOOST_TEST(!json::parse(written).contains("kind"));
  BOOST_TEST(hf_tokenizer_from_json(written, "written").to_json() == t.to_json());
  const BytePairEncoding bpe = train_bpe({{.name = "text.txt", .text = "the cat sat on the mat"}}, {.vocab_size = 262});
  BOOST_TEST(tokenizer_json_file(Tokenizer::bpe(bpe)) == hf_tokenizer_json(bpe));
  AG_CHECK_THROWS_WITH(tokenizer_json_file(Tokenizer::bytes()), std::invalid_argument, "byte tokenizer",
                       "not a byte-pair encoding");
}

BOOST_AUTO_TEST_CASE(load_tokenizer_tells_a_tokenizer_json_from_a_vocabulary_file) {
  TempDir dir;
  const BytePairEncoding bpe = train_bpe({{.name = "t", .text = "the cat sat on the mat"}}, {.vocab_size = 262});
  bpe.save(dir.file("v.bpe"));
  spit(dir.file("tokenizer.json"), hf_tokenizer_json(bpe));
  BOOST_TEST(std::string(load_tokenizer(dir.file("v.bpe")).kind_name()) == "bpe");
  BOOST_TEST(std::string(load_tokenizer(dir.file("tokenizer.json")).kind_name()) == "hf_bpe");
  BOOST_TEST(load_tokenizer(dir.file("tokenizer.json")).encode("the mat") == bpe.encode("the mat"));
  AG_CHECK_THROWS_WITH(load_tokenizer(dir.file("missing.json")), std::invalid_argument, "missing.json");
}

// Each bad or unsupported file: the error names the file and the field.
BOOST_AUTO_TEST_CASE(bad_and_unsupported_files_are_errors_naming_the_file_and_the_field) {
  TempDir dir;
  const std::string path = dir.file("tokenizer.json");
  const auto refused = [&](const json& file, std::vector<std::string> words) {
    spit(path, file.dump());
    BOOST_TEST_CONTEXT(words.front()) {
      try {
        read_hf_tokenizer(path);
        BOOST_ERROR("no error");
      } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        BOOST_TEST(what.find(path) != std::string::npos, what);
        for (const std::string& w : words) BOOST_TEST(what.find(w) != std::string::npos, what << " lacks " << w);
      }
    }
  };
  const json good = small_file();
  spit(path, good.dump());
  BOOST_CHECK_NO_THROW(read_hf_tokenizer(path));
  spit(path, good.dump().substr(0, 100));
  AG_CHECK_THROWS_WITH(read_hf_tokenizer(path), std::invalid_argument, path, "not valid JSON");
  AG_CHECK_THROWS_WITH(read_hf_tokenizer(dir.file("nothing.json")), std::invalid_argument, "nothing.json");

  json f = good;
  f.erase("model");
  refused(f, {"\"model\""});
  f = good, f["model"]["type"] = "WordPiece";
  refused(f, {"model.type", "WordPiece"});
  f = good, f["model"]["type"] = "Unigram";
  refused(f, {"model.type", "Unigram"});
  f = good, f["model"].erase("vocab");
  refused(f, {"model.vocab"});
  f = good, f["model"]["merges"].push_back({"the", "zzz"});
  refused(f, {"model.merges[", "zzz", "not in model.vocab"});
  f = good, f["model"]["merges"].push_back("t h e");
  refused(f, {"model.merges[", "one space"});
  f = good, f["model"]["merges"].push_back({"x", "q"});
  refused(f, {"model.merges[", "makes \"xq\""});
  f = good, f["model"]["vocab"]["zz"] = id(good, "a");
  refused(f, {"model.vocab", "id " + std::to_string(id(good, "a")), "taken"});
  f = good, f["added_tokens"][0]["id"] = id(good, "a");
  refused(f, {"added_tokens[0]", "<|endoftext|>", "taken"});
  f = good, f["model"]["vocab"]["zz"] = 100000;
  refused(f, {"no token has id", "without a gap"});
  f = good, f["model"]["vocab"].erase("a");
  refused(f, {"model.vocab", "byte 97"});
  f = good, f["model"]["vocab"]["a"] = "one";
  refused(f, {"model.vocab token \"a\"", "integer id"});
  f = good, f["normalizer"] = {{"type", "NFKC"}};
  refused(f, {"normalizer", "NFKC", "not supported"});
  f = good, f["pre_tokenizer"] = {{"type", "Whitespace"}};
  refused(f, {"pre_tokenizer", "Whitespace", "not supported"});
  f = good, f["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  refused(f, {"pre_tokenizer.pretokenizers[0].behavior", "Removed"});
  f = good, f["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(unclosed"}};
  refused(f, {"does not compile"});
  f = good, f["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
  refused(f, {"add_prefix_space"});
  f = good, f["added_tokens"][0]["single_word"] = true;
  refused(f, {"added_tokens[0]", "single_word"});
  f = good, f["normalizer"] = {{"type", "NFC"}}, f["added_tokens"][0]["normalized"] = true;
  refused(f, {"added_tokens[0]", "normalized"});
  f = good, f["decoder"] = nullptr;
  refused(f, {"decoder", "ByteLevel"});
  f = good, f["model"]["dropout"] = 0.1;
  refused(f, {"model.dropout"});
  f = good, f["model"]["continuing_subword_prefix"] = "##";
  refused(f, {"model.continuing_subword_prefix"});
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
