// Token shards (text/token_shards.h) and the streaming encoder (text_stream.h): each of the
// three layouts, written here byte by byte, reads back as its tokens; broken files are refused
// naming the file, the byte offset and the values; a set splits into training and validation
// files by name; pages read are not kept; batches walk the training tokens in order as a pure
// function of the step; a GPT job on shards stops and resumes bit for bit and refuses other
// shards; and a text encoded in pieces cut at the safe places gives the tokens of the whole text.
#include <cstring>
#include <fstream>
#include <numeric>

#include "attograd/models/gpt/gpt_job.h"
#include "attograd/text/bpe.h"
#include "attograd/text/text_stream.h"
#include "attograd/text/token_shards.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/trainer.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {

std::string le(uint64_t v, int bytes) {
  std::string out;
  for (int b = 0; b < bytes; ++b) out += static_cast<char>((v >> (8 * b)) & 0xff);
  return out;
}

std::string token_bytes_of(const std::vector<int64_t>& tokens, int width) {
  std::string out;
  for (const int64_t t : tokens) out += le(static_cast<uint64_t>(t), width);
  return out;
}

// nanoGPT's train.bin: the tokens alone, uint16.
std::string nanogpt_file(const std::vector<int64_t>& tokens) { return token_bytes_of(tokens, 2); }

// llm.c's write_datafile: 256 int32 (magic, version, count, zeros), then the tokens.
std::string llmc_file(const std::vector<int64_t>& tokens, uint32_t version = 1, int64_t count = -1) {
  std::string header = le(20240520, 4) + le(version, 4) + le(count < 0 ? tokens.size() : static_cast<uint64_t>(count), 4);
  header.resize(1024, '\0');
  return header + token_bytes_of(tokens, version == 1 ? 2 : 4);
}

// The byte tokenizer's description, as prepare_text records it.
const std::string kBytes = Tokenizer::bytes().to_json();

// Ours: "agtokens", version, bytes per token, count (uint64), the description's length and
// CRC-32C (uint32 each), the description padded with zeros to a multiple of 8, the tokens.
std::string attograd_file(const std::vector<int64_t>& tokens, int width, uint32_t version = 2, int64_t count = -1,
                          const std::string& description = kBytes) {
  std::string padded = description;
  padded.resize((padded.size() + 7) / 8 * 8, '\0');
  return std::string("agtokens") + le(version, 4) + le(static_cast<uint64_t>(width), 4) +
         le(count < 0 ? tokens.size() : static_cast<uint64_t>(count), 8) + le(description.size(), 4) +
         le(crc32c(description.data(), description.size()), 4) + padded + token_bytes_of(tokens, width);
}

std::vector<int64_t> read_all(const TokenShard& shard) {
  std::vector<int64_t> out(shard.size());
  shard.read(0, shard.size(), out.data());
  return out;
}

std::vector<int64_t> counting(int64_t n, int64_t modulo) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = (i * 7 + 3) % modulo;
  return out;
}

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

// Text that tries every way a cut could go wrong: blank runs before and after newlines,
// contractions, numbers, punctuation, non-ASCII letters and blanks, the special token.
std::string tricky_text() {
  const std::string lines[] = {
      "Hello world\n",          "  indented line\n",   "trailing blanks   \n", "\n",
      "\n\n  two blank lines\n", "it's we'll they've\n", "x\ny\nz\n",            "numbers 12345 67\n",
      "tabs\there\t\n",          "caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 dash\n", "nbsp\xc2\xa0here\n",
      "<|endoftext|>\nafter\n",  "a\n b\n",               "end.\n",                "!!!\n???\n"};
  std::string text;
  for (int r = 0; r < 12; ++r) {
    for (const std::string& l : lines) text += l;
    text += std::to_string(r * 31) + "\n";
  }
  return text;
}

std::vector<int64_t> encode_in_pieces(const Tokenizer& tok, const std::string& text, size_t chunk, size_t feed) {
  ChunkedEncoder enc(tok, chunk);
  std::vector<int64_t> ids;
  for (size_t at = 0; at < text.size(); at += feed) enc.push(std::string_view(text).substr(at, feed), ids);
  enc.finish(ids);
  return ids;
}

GPTOptions tiny_gpt() {
  return {.vocab = 256, .block_size = 8, .d_model = 16, .n_head = 2, .n_layers = 1, .dropout = 0.1, .bias = true};
}

TrainerOptions tiny_trainer(int64_t steps) {
  TrainerOptions o;
  o.lr = 1e-2;
  o.warmup_steps = 2;
  o.steps = steps;
  o.eval_every = 4;
  o.threads = 1;
  return o;
}

// A GPT on byte tokens read from shards, built as train_gpt builds it.
struct ShardRun {
  std::unique_ptr<GPT> model;
  std::unique_ptr<GPTJob> job;
  std::unique_ptr<Trainer> trainer;
  ShardRun(const std::vector<std::string>& data, const TrainerOptions& o, TrainerOutputs outputs = {}) {
    const GPTJobOptions j{.batch = 4, .seed = 5, .eval_windows = 8, .sample_tokens = 4};
    manual_seed(j.seed);
    model = std::make_unique<GPT>(tiny_gpt());
    job = std::make_unique<GPTJob>(*model, Tokenizer::bytes(), open_shard_set(data, 256, 0.9), j);
    trainer = std::make_unique<Trainer>(*job, o, std::move(outputs));
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(token_shards)

BOOST_AUTO_TEST_CASE(each_layout_reads_back_its_tokens_byte_for_byte) {
  TempDir dir;
  const std::vector<int64_t> small = {0, 1, 255, 256, 50256, 65535, 12345, 7};
  const std::vector<int64_t> large = {0, 65536, 100000, 4294967295, 42};
  spit(dir.file("train.bin"), nanogpt_file(small));
  spit(dir.file("llmc.bin"), llmc_file(small));
  spit(dir.file("llmc_v2.bin"), llmc_file(large, 2));
  spit(dir.file("ours16.bin"), attograd_file(small, 2));
  spit(dir.file("ours32.bin"), attograd_file(large, 4));
  const struct {
    const char* name;
    ShardLayout layout;
    int width;
    uint64_t header;
    const std::vector<int64_t>& tokens;
  } cases[] = {{"train.bin", ShardLayout::nanogpt, 2, 0, small},    {"llmc.bin", ShardLayout::llmc, 2, 1024, small},
               {"llmc_v2.bin", ShardLayout::llmc, 4, 1024, large},  {"ours16.bin", ShardLayout::attograd, 2, 48, small},
               {"ours32.bin", ShardLayout::attograd, 4, 48, large}};
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      const TokenShard shard(dir.file(c.name), 0, ShardFormat::nanogpt);
      // Only ours say which tokenizer made them.
      BOOST_TEST(shard.info().tokenizer == (c.layout == ShardLayout::attograd ? kBytes : ""));
      BOOST_TEST(static_cast<int>(shard.info().layout) == static_cast<int>(c.layout));
      BOOST_TEST(shard.info().token_bytes == c.width);
      BOOST_TEST(shard.info().header_bytes == c.header);
      BOOST_TEST(read_all(shard) == c.tokens, boost::test_tools::per_element());
      // A part from the middle, too.
      std::vector<int64_t> part(2);
      shard.read(2, 2, part.data());
      BOOST_TEST(part == std::vector<int64_t>(c.tokens.begin() + 2, c.tokens.begin() + 4), boost::test_tools::per_element());
    }
  }
  // The writer writes exactly our layout.
  {
    ShardWriter w(dir.file("written16.bin"), 2, kBytes);
    w.append(small.data(), 3);
    w.append(small.data() + 3, small.size() - 3);
    w.commit();
    const std::string eight = R"({"kind":"char","symbols":["a"]})";  // 31 bytes: padded to 32
    ShardWriter w32(dir.file("written32.bin"), 4, eight);
    w32.append(large.data(), large.size());
    w32.commit();
    BOOST_TEST(slurp(dir.file("written32.bin")) == attograd_file(large, 4, 2, -1, eight));
    BOOST_TEST(inspect_shard(dir.file("written32.bin")).tokenizer == eight);
  }
  BOOST_TEST(slurp(dir.file("written16.bin")) == attograd_file(small, 2));
  BOOST_TEST(shard_token_bytes(65536) == 2);
  BOOST_TEST(shard_token_bytes(65537) == 4);
  AG_CHECK_THROWS_WITH(ShardWriter(dir.file("x.bin"), 2, kBytes).append(large.data() + 1, 1), std::invalid_argument,
                       "65536");
  AG_CHECK_THROWS_WITH(ShardWriter(dir.file("x.bin"), 2, ""), std::invalid_argument, "description");
}

BOOST_AUTO_TEST_CASE(broken_files_are_refused_naming_the_file_the_offset_and_the_values) {
  TempDir dir;
  const std::vector<int64_t> t = counting(100, 256);
  const auto refused = [&](const std::string& name, const std::string& bytes, std::initializer_list<std::string> parts) {
    spit(dir.file(name), bytes);
    try {
      inspect_shard(dir.file(name), 256, ShardFormat::nanogpt);
      BOOST_ERROR(name << " was read");
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      BOOST_TEST(msg.find(dir.file(name)) != std::string::npos, msg);
      for (const std::string& p : parts) BOOST_TEST(msg.find(p) != std::string::npos, "'" << msg << "' lacks '" << p << "'");
    }
  };
  const std::string ours = attograd_file(t, 2), llmc = llmc_file(t);
  refused("short_header.bin", ours.substr(0, 20), {"truncated", "20 bytes", "header of 32", "offset 20"});
  refused("llmc_short_header.bin", llmc.substr(0, 600), {"truncated", "600 bytes", "1024", "offset 600"});
  refused("truncated.bin", ours.substr(0, ours.size() - 10), {"counts 100 tokens", "byte offset 248", "238 bytes", "truncated"});
  refused("llmc_truncated.bin", llmc.substr(0, llmc.size() - 1), {"counts 100 tokens", "offset 1224", "1223 bytes"});
  refused("count.bin", attograd_file(t, 2, 2, 90), {"counts 90 tokens", "offset 228", "248 bytes", "after the tokens"});
  refused("version.bin", attograd_file(t, 2, 7), {"version 7", "byte offset 8", "knows 2"});
  // Version 1 recorded no tokenizer: its tokens cannot say what they mean.
  const std::string v1 = std::string("agtokens") + le(1, 4) + le(2, 4) + le(t.size(), 8) + std::string(8, '\0') +
                         token_bytes_of(t, 2);
  refused("v1.bin", v1, {"version 1", "byte offset 8", "prepare_text"});
  std::string bad_description = ours;
  bad_description[34] ^= 1;
  refused("description.bin", bad_description, {"description", "byte offset 28", "damaged"});
  refused("no_description.bin", attograd_file(t, 2, 2, -1, ""), {"description", "byte offset 24", "0 bytes"});
  std::string long_description = ours;
  long_description[26] = 1;  // 65551 bytes: past the file
  refused("long_description.bin", long_description, {"description", "65551 bytes", "248 bytes"});
  refused("llmc_version.bin", llmc_file(t, 3), {"version 3", "byte offset 4"});
  refused("width.bin", attograd_file(t, 3), {"bytes per token 3", "byte offset 12"});
  std::string bad_magic = ours;
  bad_magic[0] = 'x';
  refused("magic.bin", bad_magic, {"wrong magic", "byte offset 0", "agtokens"});
  std::string bad_llmc = llmc;
  bad_llmc[0] = 0;
  refused("llmc_magic.bin", bad_llmc, {"wrong magic", "byte offset 0", "20240520"});
  refused("odd.bin", nanogpt_file(t) + "x", {"odd", "201", "offset 200"});
  refused("empty.bin", "", {"empty"});
  // Without a header a file is nanoGPT's only when the reader is told so: text, zeros.
  for (const auto& [name, bytes, shown] : {std::tuple{"notes.bin", std::string("Notes of Tuesday.\n"), "Notes of"},
                                          std::tuple{"zeros.bin", std::string(4096, '\0'), "00 00 00 00"}}) {
    spit(dir.file(name), bytes);
    AG_CHECK_THROWS_WITH(inspect_shard(dir.file(name), 256), std::runtime_error, dir.file(name), "no attograd or llm.c header",
                         shown, "--shard-format nanogpt");
    BOOST_TEST(inspect_shard(dir.file(name), 0, ShardFormat::nanogpt).tokens == bytes.size() / 2);
  }
  // A token past the vocabulary is found at open, wherever it is.
  std::vector<int64_t> big = t;
  big[40] = 300;
  refused("vocab.bin", attograd_file(big, 2), {"byte offset 128", "is 300", "vocabulary of 256"});
  spit(dir.file("vocab_llmc.bin"), llmc_file(big));
  const TokenShard unchecked(dir.file("vocab_llmc.bin"), 0);
  BOOST_TEST(read_all(unchecked)[40] == 300);
  std::vector<int64_t> long_tokens = counting(2 << 20, 256);  // 4 MiB of uint16
  long_tokens[1 << 20] = 999;
  refused("deep.bin", nanogpt_file(long_tokens), {"byte offset 2097152", "is 999", "256"});
  // A name that says shard on what is not a file: a link to nothing, a folder.
  std::filesystem::create_directories(dir.file("dangling"));
  spit(dir.file("dangling/a.bin"), ours);
  std::filesystem::create_symlink(dir.file("gone.bin"), dir.file("dangling/zz.bin"));
  AG_CHECK_THROWS_WITH(list_token_shards({dir.file("dangling")}), std::runtime_error, "zz.bin", "symbolic link",
                       dir.file("gone.bin"), "does not exist");
  std::filesystem::remove(dir.file("dangling/zz.bin"));
  std::filesystem::create_directories(dir.file("dangling/sub.bin"));
  AG_CHECK_THROWS_WITH(list_token_shards({dir.file("dangling")}), std::runtime_error, "sub.bin", "not a regular file");
  // Sets: an empty directory, validation files only.
  std::filesystem::create_directories(dir.file("none"));
  AG_CHECK_THROWS_WITH(open_shard_set({dir.file("none")}, 256, 0.9), std::runtime_error, dir.file("none"), "no *.bin");
  std::filesystem::create_directories(dir.file("valonly"));
  spit(dir.file("valonly/val.bin"), attograd_file(t, 2));
  AG_CHECK_THROWS_WITH(open_shard_set({dir.file("valonly")}, 256, 0.9), std::runtime_error, "none trains");
}

BOOST_AUTO_TEST_CASE(a_set_reads_its_files_in_name_order_with_val_files_apart) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("set"));
  const std::vector<int64_t> a = counting(50, 256), b = counting(30, 200), v = counting(20, 100);
  spit(dir.file("set/data_train_000001.bin"), attograd_file(b, 4));
  spit(dir.file("set/data_train_000000.bin"), attograd_file(a, 2));
  spit(dir.file("set/data_val_000000.bin"), attograd_file(v, 2));
  spit(dir.file("set/notes.txt"), "not a shard");
  const ShardSet set = open_shard_set({dir.file("set")}, 256, 0.9);
  BOOST_TEST(set.tokenizer == kBytes);
  BOOST_TEST(set.train.size() == 80u);
  BOOST_TEST(set.val.size() == 20u);
  BOOST_TEST(!set.val_is_tail);
  std::vector<int64_t> all(80), want = a;
  want.insert(want.end(), b.begin(), b.end());
  set.train.read(0, 80, all.data());
  BOOST_TEST(all == want, boost::test_tools::per_element());
  BOOST_TEST(set.val.to_vector() == v, boost::test_tools::per_element());
  BOOST_TEST(is_validation_shard("val.bin"));
  BOOST_TEST(is_validation_shard("fineweb_val_000000.bin"));
  BOOST_TEST(!is_validation_shard("interval_000000.bin"));
  BOOST_TEST(!is_validation_shard("train.bin"));
  // Without a validation file, the tail validates.
  const ShardSet tail = open_shard_set({dir.file("set/data_train_000000.bin"), dir.file("set/data_train_000001.bin")}, 256,
                                       0.75);
  BOOST_TEST(tail.val_is_tail);
  BOOST_TEST(tail.train.size() == 60u);
  BOOST_TEST(tail.val.to_vector() == std::vector<int64_t>(want.begin() + 60, want.end()), boost::test_tools::per_element());
  // The files of a set were made by one tokenizer: another description, or none, is refused
  // naming both files; files that record none go together (the run names their tokenizer).
  std::filesystem::create_directories(dir.file("mixed"));
  spit(dir.file("mixed/a.bin"), attograd_file(a, 2));
  spit(dir.file("mixed/b.bin"), attograd_file(a, 2, 2, -1, R"({"kind":"char","symbols":["a","b"]})"));
  AG_CHECK_THROWS_WITH(open_shard_set({dir.file("mixed")}, 256, 0.9), std::runtime_error, "different tokenizers",
                       dir.file("mixed/a.bin"), "byte tokenizer of 256 ids", dir.file("mixed/b.bin"),
                       "char tokenizer of 2 ids");
  spit(dir.file("mixed/b.bin"), llmc_file(a));
  AG_CHECK_THROWS_WITH(shard_set_tokenizer({dir.file("mixed")}), std::runtime_error, "llm.c's layout) records no tokenizer");
  std::filesystem::remove(dir.file("mixed/a.bin"));
  spit(dir.file("mixed/c.bin"), nanogpt_file(a));
  BOOST_TEST(open_shard_set({dir.file("mixed")}, 256, 0.9, ShardFormat::nanogpt).tokenizer.empty());
}

BOOST_AUTO_TEST_CASE(batches_walk_the_training_tokens_in_order_as_a_function_of_the_step) {
  TempDir dir;
  const std::vector<int64_t> t = counting(1000, 256);
  spit(dir.file("a.bin"), attograd_file(std::vector<int64_t>(t.begin(), t.begin() + 333), 2));
  spit(dir.file("b.bin"), attograd_file(std::vector<int64_t>(t.begin() + 333, t.end()), 4));
  const ShardSet set = open_shard_set({dir.file("a.bin"), dir.file("b.bin")}, 256, 0.9);  // tail validates
  const int64_t B = 3, T = 8;
  const uint64_t n = set.train.size(), windows = (n - 1) / T;
  for (const int64_t step : {0, 1, 7, 37, 1000}) {
    const TextBatch batch = sequential_batch(set.train, {.batch = B, .block_size = T}, step, 0, B);
    for (int64_t r = 0; r < B; ++r) {
      const uint64_t start = ((static_cast<uint64_t>(step * B + r)) % windows) * T;
      for (int64_t i = 0; i < T; ++i) {
        BOOST_TEST(batch.inputs.data[static_cast<size_t>(r * T + i)] == t[start + i]);
        BOOST_TEST(batch.targets.data[static_cast<size_t>(r * T + i)] == t[start + i + 1]);
      }
    }
    // A rank's rows are those rows of the whole batch.
    const TextBatch part = sequential_batch(set.train, {.batch = B, .block_size = T}, step, 1, 2);
    BOOST_TEST(std::vector<int64_t>(part.inputs.data.begin(), part.inputs.data.end()) ==
                   std::vector<int64_t>(batch.inputs.data.begin() + T, batch.inputs.data.end()),
               boost::test_tools::per_element());
  }
  // The validation windows are eval_batches' over the same tokens.
  const std::vector<int64_t> val = set.val.to_vector();
  const std::vector<TextBatch> ours = shard_eval_batches(set.val, {.batch = 2, .block_size = T}, 5);
  const std::vector<TextBatch> text = eval_batches(val, {.batch = 2, .block_size = T}, 5);
  BOOST_TEST_REQUIRE(ours.size() == text.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    BOOST_TEST(ours[i].inputs.data == text[i].inputs.data, boost::test_tools::per_element());
    BOOST_TEST(ours[i].targets.data == text[i].targets.data, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(a_run_on_shards_stopped_and_resumed_is_bit_exact_and_refuses_other_shards) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("set"));
  std::string text;
  while (text.size() < 6000) text += "the quick brown fox jumps over the lazy dog; pack my box with five dozen jugs\n";
  std::vector<int64_t> bytes(text.begin(), text.end());
  spit(dir.file("set/train_000000.bin"), attograd_file(std::vector<int64_t>(bytes.begin(), bytes.begin() + 5000), 2));
  spit(dir.file("set/val_000000.bin"), attograd_file(std::vector<int64_t>(bytes.begin() + 5000, bytes.end()), 2));
  const TrainerOptions o = tiny_trainer(10);

  std::vector<double> straight_losses;
  ShardRun straight({dir.file("set")}, o, {.on_step = [&](int64_t, double loss) { straight_losses.push_back(loss); }});
  const TrainSummary full = straight.trainer->run();
  BOOST_TEST(full.steps == 10);

  std::vector<double> losses;
  Trainer* first_trainer = nullptr;
  TrainerOutputs first_out{.checkpoint_path = dir.file("ckpt.safetensors"), .on_step = [&](int64_t step, double loss) {
                             losses.push_back(loss);
                             if (step == 6) first_trainer->request_stop();
                           }};
  ShardRun first({dir.file("set")}, o, first_out);
  first_trainer = first.trainer.get();
  BOOST_TEST(first.trainer->run().steps == 6);

  manual_seed(999);
  ShardRun second({dir.file("set")}, o, {.on_step = [&](int64_t, double loss) { losses.push_back(loss); }});
  second.trainer->resume(dir.file("ckpt.safetensors"));
  BOOST_TEST(second.trainer->run().steps == 10);
  BOOST_TEST(losses == straight_losses, boost::test_tools::per_element());
  BOOST_TEST(parameter_values(*straight.model) == parameter_values(*second.model), boost::test_tools::per_element());

  // The data entry names the files; the same tokens under another name, or one token changed,
  // are other shards.
  const std::string entry = Checkpoint::open(dir.file("ckpt.safetensors")).entry("data");
  BOOST_TEST(entry.find("\"name\":\"train_000000.bin\"") != std::string::npos, entry);
  BOOST_TEST(entry.find("\"validation\":\"shards\"") != std::string::npos, entry);
  bytes[10] = 'Q';
  spit(dir.file("set/train_000000.bin"), attograd_file(std::vector<int64_t>(bytes.begin(), bytes.begin() + 5000), 2));
  ShardRun changed({dir.file("set")}, o);
  AG_CHECK_THROWS_WITH(changed.trainer->resume(dir.file("ckpt.safetensors")), std::runtime_error, "'data' entry",
                       "crc32c");
}

BOOST_AUTO_TEST_CASE(the_checksum_covers_the_whole_file) {
  // One token changed in the middle of a shard of many MiB changes what a checkpoint records.
  TempDir dir;
  std::vector<int64_t> tokens = counting(3 << 20, 256);  // 6 MiB
  spit(dir.file("a.bin"), attograd_file(tokens, 2));
  const uint32_t before = inspect_shard(dir.file("a.bin"), 256).crc32c;
  tokens[3 << 19] ^= 1;
  spit(dir.file("a.bin"), attograd_file(tokens, 2));
  BOOST_TEST(inspect_shard(dir.file("a.bin"), 256).crc32c != before);
  BOOST_TEST(read_shard_header(dir.file("a.bin")).crc32c == 0u);  // the header alone reads no tokens
}

// The resident size (VmRSS, file pages of mappings included) in KiB.
int64_t resident_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Reading a shard end to end keeps none of the pages passed: 64 MiB read in 1 MiB pieces leave
// the resident size within 8 MiB of where it was (mapped pages would count in it otherwise).
BOOST_AUTO_TEST_CASE(pages_read_are_not_kept) {
  TempDir dir;
  {
    std::ofstream out(dir.file("big.bin"), std::ios::binary);
    const std::string block(1 << 20, '\x01');  // tokens 257
    for (int i = 0; i < 64; ++i) out.write(block.data(), static_cast<std::streamsize>(block.size()));
  }
  const TokenShard shard(dir.file("big.bin"), 0, ShardFormat::nanogpt);
  std::vector<int64_t> piece(1 << 19);
  const int64_t before = resident_kib();
  for (uint64_t at = 0; at < shard.size(); at += piece.size()) shard.read(at, piece.size(), piece.data());
  const int64_t after = resident_kib();
  BOOST_TEST(piece.back() == 257);
  BOOST_TEST(after - before < 8 * 1024, "resident " << before << " KiB before, " << after << " KiB after 64 MiB");
}

BOOST_AUTO_TEST_CASE(a_text_encoded_in_pieces_gives_the_tokens_of_the_whole) {
  const std::string text = tricky_text();
  const Tokenizer bytes = Tokenizer::bytes();
  for (const size_t chunk : {size_t{1}, size_t{5}, size_t{64}}) {
    BOOST_TEST(encode_in_pieces(bytes, text, chunk, 3) == bytes.encode(text), boost::test_tools::per_element());
  }
  // A character vocabulary: cuts never split a character.
  const Tokenizer chars = Tokenizer::characters(text);
  BOOST_TEST(encode_in_pieces(chars, text, 4, 7) == chars.encode(text), boost::test_tools::per_element());
  // The cut rule of the character and byte-pair kinds: after "x\n" before "y", never inside a
  // blank run; bytes cut anywhere.
  BOOST_TEST(last_safe_cut("ab\ncd", chars) == 3u);
  BOOST_TEST(last_safe_cut("ab\n\n cd", chars) == 0u);
  BOOST_TEST(last_safe_cut("ab \ncd", chars) == 0u);
  BOOST_TEST(last_safe_cut("ab\n cd", chars) == 0u);
  BOOST_TEST(last_safe_cut("ab\n cd", bytes) == 5u);  // before the last byte
  if (!have_gpt2_files()) return;
  const Tokenizer gpt2 = Tokenizer::bpe(BytePairEncoding::gpt2());
  const std::vector<int64_t> whole = gpt2.encode(text);
  for (const size_t chunk : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}}) {
    BOOST_TEST_CONTEXT("chunk " << chunk) {
      ChunkedEncoder enc(gpt2, chunk);
      std::vector<int64_t> ids;
      int pieces = 0;
      for (size_t at = 0; at < text.size(); at += 5) {
        const size_t before = ids.size();
        enc.push(std::string_view(text).substr(at, 5), ids);
        pieces += ids.size() > before;
      }
      enc.finish(ids);
      BOOST_TEST(ids == whole, boost::test_tools::per_element());
      if (chunk < 100) BOOST_TEST(pieces > 20);  // the text really was encoded in many pieces
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
