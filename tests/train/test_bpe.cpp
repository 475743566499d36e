// Byte-pair encoding (text/bpe.h): training by hand-checked examples, the tie-break, the
// file format and the Tokenizer's description, GPT-2's known ids, and every bad input named by
// its file. The comparisons with independent references (tiktoken, a naive trainer) are the
// node-driven tests in tests/data.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>

#include "attograd/core/parallel.h"
#include "attograd/core/threads.h"
#include "attograd/models/gpt/gpt_job.h"
#include "attograd/text/bpe.h"
#include "attograd/text/corpus.h"
#include "train_support.h"

namespace ag::testing {
namespace {

void write_text(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

BytePairEncoding train_on(const std::string& text, int64_t vocab, std::vector<std::string> specials = {}) {
  return train_bpe({{.name = "text.txt", .text = text}}, {.vocab_size = vocab, .specials = std::move(specials)});
}

// Sets an environment variable for the scope of the object, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// GPT-2's files, which tests/data/install_references.sh (run by CI) puts in the cache. Without
// them a test that needs them says how to get them: it fails in CI and is passed over elsewhere.
bool have_gpt2_files() {
  const std::string dir = gpt2_vocab_dir();
  const bool present = std::filesystem::exists(dir + "/encoder.json") && std::filesystem::exists(dir + "/vocab.bpe");
  if (!present) {
    const char* ci = std::getenv("CI");
    const std::string hint = "GPT-2's files are not in " + dir + ": run text/fetch_gpt2_vocab.sh";
    if (ci != nullptr && std::string(ci) == "true") BOOST_FAIL(hint);
    BOOST_TEST_MESSAGE("skipped: " + hint);
  }
  return present;
}

std::vector<std::string> random_byte_strings(int count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string s(gen() % 64, '\0');
    for (char& c : s) c = static_cast<char>(gen() % 256);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bpe)

// ---- training -----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(training_merges_the_most_frequent_pair_and_breaks_ties_by_the_smallest_ids) {
  // One chunk "aaab": (a, a) occurs twice, (a, b) once, so (a, a) merges first, left to right
  // ("aa" + "a" b). Then (256, a) and (a, b) both occur once: the tie goes to the smaller left id,
  // 97 < 256.
  const BytePairEncoding bpe = train_on("aaab", 258);
  BOOST_TEST(bpe.merges().size() == 2u);
  BOOST_TEST((bpe.merges()[0] == BPEMerge{97, 97}));
  BOOST_TEST((bpe.merges()[1] == BPEMerge{97, 98}));
  BOOST_TEST(bpe.vocab_size() == 258);
  BOOST_TEST(bpe.token_bytes(256) == "aa");
  BOOST_TEST(bpe.token_bytes(257) == "ab");
  BOOST_TEST(bpe.encode("aaab") == (std::vector<int64_t>{256, 257}));
}

BOOST_AUTO_TEST_CASE(training_counts_pairs_inside_chunks_only) {
  // "ab ab ab" is the chunks "ab", " ab", " ab": the pair (b, space) never occurs inside a
  // chunk, so it is never merged; (a, b) occurs 3 times, (space, a) twice.
  const BytePairEncoding bpe = train_on("ab ab ab", 258);
  BOOST_TEST((bpe.merges()[0] == BPEMerge{'a', 'b'}));
  BOOST_TEST((bpe.merges()[1] == BPEMerge{' ', 256}));
  BOOST_TEST(bpe.encode("ab ab") == (std::vector<int64_t>{256, 257}));
  // A third merge would have to join two chunks.
  AG_CHECK_THROWS_WITH(train_on("ab ab ab", 259), std::invalid_argument, "text.txt", "more than the text allows",
                       "258 tokens");
}

BOOST_AUTO_TEST_CASE(specials_follow_the_merges_and_are_found_inside_text) {
  const BytePairEncoding bpe = train_on("hello hello hello", 258, {"<|end|>", "<|pad|>"});
  BOOST_TEST(bpe.vocab_size() == 258);
  BOOST_TEST(bpe.merges().size() == 0u);
  const BytePairEncoding more = train_on("hello hello hello", 260, {"<|end|>"});
  BOOST_TEST(more.merges().size() == 3u);
  BOOST_TEST(more.token_bytes(259) == "<|end|>");
  // Every pair of "hello" occurs 3 times: "el" (e = 101 is the smallest left id), then "hel"
  // (h = 104 < l = 108), then "lo". "he" alone has no merge, so it stays two bytes.
  BOOST_TEST(more.token_bytes(256) == "el");
  BOOST_TEST(more.token_bytes(257) == "hel");
  BOOST_TEST(more.token_bytes(258) == "lo");
  const std::vector<int64_t> ids = more.encode("he<|end|>he");
  BOOST_TEST(ids == (std::vector<int64_t>{'h', 'e', 259, 'h', 'e'}));
  BOOST_TEST(more.decode(ids) == "he<|end|>he");
}

// Bits per byte weigh each target by the bytes it stands for: a merge its pieces', a special its
// text's.
BOOST_AUTO_TEST_CASE(the_tokenizer_gives_each_id_the_bytes_it_stands_for) {
  const Tokenizer tok = Tokenizer::bpe(train_on("hello hello hello", 260, {"<|end|>"}));
  const std::vector<int64_t> lengths = tok.token_bytes();
  BOOST_TEST(lengths.size() == 260u);
  BOOST_TEST(lengths['h'] == 1);
  BOOST_TEST(lengths[256] == 2);  // "el"
  BOOST_TEST(lengths[257] == 3);  // "hel"
  BOOST_TEST(lengths[259] == 7);  // "<|end|>"
}

BOOST_AUTO_TEST_CASE(a_trained_vocabulary_is_the_same_on_one_thread_and_two) {
  const std::string text = read_corpus("");
  const int before = num_threads();
  set_num_threads(1);
  const std::string one = train_on(text, 600).to_json();
  set_num_threads(2);
  const std::string two = train_on(text, 600).to_json();
  set_num_threads(before);
  BOOST_TEST(one == two);
}

BOOST_AUTO_TEST_CASE(decoding_gives_back_every_byte_string) {
  const BytePairEncoding bpe = train_on(read_corpus("").substr(0, 200000), 700, {"<|endoftext|>"});
  for (const std::string& s : random_byte_strings(2000, 7)) BOOST_TEST(bpe.decode(bpe.encode(s)) == s);
  std::string all(256, '\0');
  for (int b = 0; b < 256; ++b) all[static_cast<size_t>(b)] = static_cast<char>(b);
  BOOST_TEST(bpe.decode(bpe.encode(all)) == all);
  // Invalid UTF-8 in the middle of words: its bytes come back as they were.
  const std::string mixed = "caf\xC3 \xA9t\xE2\x82 the \xFF\xFE<|endoftext|>\x80 end";
  BOOST_TEST(bpe.decode(bpe.encode(mixed)) == mixed);
}

BOOST_AUTO_TEST_CASE(encoding_on_two_threads_gives_the_ids_of_one) {
  const std::string text = read_corpus("");
  const BytePairEncoding bpe = train_on(text.substr(0, 300000), 800, {"<|endoftext|>"});
  // Specials near the cut points must not be split.
  std::string with_specials = text;
  for (size_t at = 1000; at < with_specials.size(); at += 99991) with_specials.insert(at, "\n<|endoftext|>");
  const int before = num_threads();
  set_num_threads(2);
  detail::force_excess(0);  // split even when other programs hold the cores
  BOOST_TEST(bpe.encode(with_specials, 2) == bpe.encode(with_specials, 1));
  detail::force_excess(-1);
  set_num_threads(before);
}

BOOST_AUTO_TEST_CASE(bad_vocabulary_sizes_and_text_with_nul_bytes_are_refused) {
  AG_CHECK_THROWS_WITH(train_on("hello", 255), std::invalid_argument, "255", "256");
  AG_CHECK_THROWS_WITH(train_on("hello", 257, {"<a>", "<b>"}), std::invalid_argument, "257", "2 specials", "258");
  AG_CHECK_THROWS_WITH(train_on(std::string("he\0llo", 6), 300), std::invalid_argument, "text.txt", "NUL",
                       "offset 2");
  AG_CHECK_THROWS_WITH(train_on("hello", 100000), std::invalid_argument, "text.txt", "more than the text allows");
}

// ---- the file and the description ---------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_saved_vocabulary_loads_back_the_same) {
  TempDir dir;
  const BytePairEncoding bpe = train_on(read_corpus("").substr(0, 100000), 500, {"<|endoftext|>"});
  bpe.save(dir.file("v.bpe"));
  const BytePairEncoding back = BytePairEncoding::load(dir.file("v.bpe"));
  BOOST_TEST(back.to_json() == bpe.to_json());
  BOOST_TEST(back.pattern() == std::string(kGPT2Pattern));
  BOOST_TEST((back.byte_order() == ByteOrder::natural));
  const std::string text = "It's 42 o'clock<|endoftext|>  and\tall's well\n";
  BOOST_TEST(back.encode(text) == bpe.encode(text));
}

BOOST_AUTO_TEST_CASE(the_tokenizer_carries_a_byte_pair_encoding_in_its_description) {
  const BytePairEncoding bpe = train_on(read_corpus("").substr(0, 100000), 400, {"<|endoftext|>"});
  const Tokenizer tok = Tokenizer::bpe(bpe);
  BOOST_TEST(std::string(tok.kind_name()) == "bpe");
  BOOST_TEST(std::string(tok.kind_name()) == "bpe");
  BOOST_TEST(tok.vocab_size() == 400);
  const Tokenizer back = Tokenizer::from_json(tok.to_json());
  BOOST_TEST(back.to_json() == tok.to_json());
  const std::string text = "Fortune favours the bold<|endoftext|>";
  BOOST_TEST(back.encode(text) == bpe.encode(text));
  BOOST_TEST(back.decode(back.encode(text)) == text);
  BOOST_TEST(back.decode(399) == "<|endoftext|>");
  // The other kinds keep their descriptions and refuse the byte-pair fields.
  BOOST_TEST(Tokenizer::bytes().to_json() == R"({"kind":"byte"})");
  AG_CHECK_THROWS_WITH(Tokenizer::from_json(R"({"kind":"byte","merges":[]})"), std::invalid_argument, "merges");
}

BOOST_AUTO_TEST_CASE(a_bad_vocabulary_file_is_an_error_naming_the_file) {
  TempDir dir;
  const std::string good = train_on("the cat sat on the mat, the end", 270).to_json();
  AG_CHECK_THROWS_WITH(BytePairEncoding::load(dir.file("missing.bpe")), std::invalid_argument, "missing.bpe");
  write_text(dir.file("truncated.bpe"), good.substr(0, good.size() / 2));
  AG_CHECK_THROWS_WITH(BytePairEncoding::load(dir.file("truncated.bpe")), std::invalid_argument, "truncated.bpe");
  write_text(dir.file("empty.bpe"), "");
  AG_CHECK_THROWS_WITH(BytePairEncoding::load(dir.file("empty.bpe")), std::invalid_argument, "empty.bpe", "empty");
  // Merge 1 may name ids 0..256 (the bytes and merge 0's token), not 300.
  write_text(dir.file("unknown.bpe"),
             R"({"kind":"bpe","pattern":"\\S+","byte_order":"natural","specials":[],"merges":[[1,2],[300,1]]})");
  AG_CHECK_THROWS_WITH(BytePairEncoding::load(dir.file("unknown.bpe")), std::invalid_argument, "unknown.bpe",
                       "merge 1", "300", "does not exist");
  write_text(dir.file("pattern.bpe"), R"({"kind":"bpe","pattern":"(","byte_order":"natural","specials":[],"merges":[]})");
  AG_CHECK_THROWS_WITH(BytePairEncoding::load(dir.file("pattern.bpe")), std::invalid_argument, "pattern.bpe",
                       "does not compile");
  // An empty pattern cuts no chunk, so no merge could ever apply.
  write_text(dir.file("nopattern.bpe"), R"({"kind":"bpe","pattern":"","byte_order":"natural","specials":[],"merges":[]})");
  AG_CHECK_THROWS_WITH(BytePairEncoding::load(dir.file("nopattern.bpe")), std::invalid_argument, "nopattern.bpe",
                       "pattern is empty");
}

// A few hundred bytes of merges, each joining the previous token with itself, describe a token of
// 2^40 bytes: the sizes are added up from the ids before any token is built.
BOOST_AUTO_TEST_CASE(a_vocabulary_whose_tokens_would_not_fit_is_refused_before_it_is_built) {
  TempDir dir;
  std::string merges = "[97,97]";
  for (int i = 1; i < 40; ++i) merges += ",[" + std::to_string(255 + i) + "," + std::to_string(255 + i) + "]";
  const std::string doubling =
      R"({"kind":"bpe","pattern":"\\S+","byte_order":"natural","specials":[],"merges":[)" + merges + "]}";
  write_text(dir.file("d40.bpe"), doubling);
  // Merge 16 makes a token of 2^17 bytes, the first above 2^16.
  AG_CHECK_THROWS_WITH(BytePairEncoding::load(dir.file("d40.bpe")), std::invalid_argument, "d40.bpe", "merge 16",
                       "131072 bytes", "65536");
  // The same description inside a checkpoint's tokenizer entry.
  AG_CHECK_THROWS_WITH(Tokenizer::from_json(doubling), std::invalid_argument, "131072 bytes");
  // Up to the bound, a long token is fine.
  std::string fifteen = "[97,97]";
  for (int i = 1; i < 15; ++i) fifteen += ",[" + std::to_string(255 + i) + "," + std::to_string(255 + i) + "]";
  const BytePairEncoding ok = BytePairEncoding::from_json(
      R"({"kind":"bpe","pattern":"\\S+","byte_order":"natural","specials":[],"merges":[)" + fifteen + "]}");
  BOOST_TEST(ok.vocab_size() == 256 + 15);
}

BOOST_AUTO_TEST_CASE(a_tokenizer_file_given_as_a_checkpoint_is_named) {
  TempDir dir;
  train_on("the cat sat on the mat", 260).save(dir.file("fortunes.bpe"));
  AG_CHECK_THROWS_WITH(load_gpt_checkpoint(dir.file("fortunes.bpe")), std::runtime_error, "fortunes.bpe",
                       "not a safetensors file", "tokenizer");
}

// ---- GPT-2 --------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(gpt2_gives_its_published_ids) {
  if (!have_gpt2_files()) return;
  const BytePairEncoding gpt2 = BytePairEncoding::gpt2();
  BOOST_TEST(gpt2.vocab_size() == 50257);
  BOOST_TEST(gpt2.merges().size() == 50000u);
  BOOST_TEST(gpt2.encode("Hello world") == (std::vector<int64_t>{15496, 995}));
  BOOST_TEST(gpt2.encode("<|endoftext|>") == (std::vector<int64_t>{50256}));
  BOOST_TEST(gpt2.encode(" ") == (std::vector<int64_t>{220}));
  BOOST_TEST(gpt2.encode("!") == (std::vector<int64_t>{0}));  // byte ids in GPT-2's order: '!' first
  BOOST_TEST(gpt2.token_bytes(1169) == "the");
  for (const std::string& s : random_byte_strings(500, 11)) BOOST_TEST(gpt2.decode(gpt2.encode(s)) == s);
}

BOOST_AUTO_TEST_CASE(gpt2_s_description_round_trips_quickly) {
  if (!have_gpt2_files()) return;
  const Tokenizer tok = Tokenizer::bpe(BytePairEncoding::gpt2());
  const std::string json = tok.to_json();
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer back = Tokenizer::from_json(json);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_MESSAGE("GPT-2's description: " << json.size() << " bytes, read back in " << seconds << " s");
  BOOST_TEST(back.vocab_size() == 50257);
  BOOST_TEST(back.to_json() == json);
  BOOST_TEST(back.encode(" the quick brown fox") == tok.encode(" the quick brown fox"));
}

BOOST_AUTO_TEST_CASE(gpt2_s_files_missing_or_damaged_are_errors_naming_the_file) {
  TempDir dir;
  {
    const ScopedEnv cache("ATTOGRAD_CACHE", dir.path());
    AG_CHECK_THROWS_WITH(BytePairEncoding::gpt2(), std::invalid_argument, dir.file("gpt2/encoder.json"),
                         "fetch_gpt2_vocab.sh");
  }
  if (!have_gpt2_files()) return;
  const std::string encoder = gpt2_vocab_dir() + "/encoder.json", vocab = gpt2_vocab_dir() + "/vocab.bpe";
  const std::string enc_text = slurp(encoder), bpe_text = slurp(vocab);
  write_text(dir.file("encoder.json"), enc_text.substr(0, enc_text.size() / 2));
  AG_CHECK_THROWS_WITH(BytePairEncoding::gpt2_from_files(dir.file("encoder.json"), vocab), std::invalid_argument,
                       dir.file("encoder.json"), "truncated");
  // The first 1,000 lines of vocab.bpe: too few merges for encoder.json's tokens.
  size_t cut = 0;
  for (int line = 0; line < 1000; ++line) cut = bpe_text.find('\n', cut) + 1;
  write_text(dir.file("vocab.bpe"), bpe_text.substr(0, cut));
  AG_CHECK_THROWS_WITH(BytePairEncoding::gpt2_from_files(encoder, dir.file("vocab.bpe")), std::invalid_argument,
                       dir.file("vocab.bpe"), "999 merges", "truncated");
  // Line 3 (merge 1) names a token encoder.json does not have.
  std::string unknown = bpe_text;
  const size_t line3 = unknown.find('\n', unknown.find('\n') + 1) + 1;
  unknown.replace(line3, unknown.find('\n', line3) - line3, "qzqzqzq xjxjxjx");
  write_text(dir.file("vocab.bpe"), unknown);
  AG_CHECK_THROWS_WITH(BytePairEncoding::gpt2_from_files(encoder, dir.file("vocab.bpe")), std::invalid_argument,
                       dir.file("vocab.bpe"), "line 3", "not in");
  AG_CHECK_THROWS_WITH(BytePairEncoding::gpt2_from_files(dir.file("nothing.json"), vocab), std::invalid_argument,
                       dir.file("nothing.json"), "fetch_gpt2_vocab.sh");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
