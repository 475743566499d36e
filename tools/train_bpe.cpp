// train_bpe: learns a byte-level BPE vocabulary from text files (by default Debian's fortunes)
// and writes it as a file that tokenize --tokenizer and train_gpt --tokenizer read.
//
//   build/tools/train_bpe --vocab-size 4096 --out fortunes.bpe
//   build/tools/train_bpe --data a.txt b.txt --vocab-size 8192 --special "<|endoftext|>" --out ab.bpe
//   build/tools/tokenize --tokenizer fortunes.bpe notes.txt
//   build/tools/train_bpe --vocab-size 4096 --format hf --out fortunes/tokenizer.json  # Hugging Face's format
//
// The vocabulary: the 256 bytes, then the merges, then the specials (--special, in order). The
// file is the vocabulary's JSON description (docs/tokenizers.md), or with --format hf a Hugging
// Face tokenizer.json of the same ids (text/hf_tokenizer.h), written atomically; an existing
// --out is replaced only with --overwrite. Exit codes: 0 done, 1 error (a file), 2 bad command line
// or a vocabulary size the text cannot fill.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "attograd/core/threads.h"
#include "attograd/text/bpe.h"
#include "attograd/text/corpus.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/outputs.h"
#include "common/threads_flag.h"
#include "common/tool_main.h"

namespace {

using namespace ag;

struct Args {
  std::vector<std::string> data;  // empty: the fortunes
  int64_t vocab_size = 4096;
  std::vector<std::string> specials;
  std::string out;
  std::string format = "bpe";
  bool overwrite = false;
  std::string threads = "auto";
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int run(const Args& args) {
  namespace fs = std::filesystem;
  if (args.out.empty()) throw UsageError("--out: the path is empty");
  set_num_threads(parse_threads(args.threads));
  // --out is checked and locked before anything is read: not a directory or a device, not one
  // of the texts, replaced only with --overwrite, and written by this run alone until it ends.
  std::vector<InputFile> inputs;
  for (const std::string& d : args.data) inputs.push_back({"--data", d, InputKind::data});
  const OutputLocks lock = [&] {
    try {
      return prepare_outputs({{"--out", args.out, OutputKind::file}}, {.overwrite = args.overwrite, .inputs = inputs});
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }();
  const auto start = std::chrono::steady_clock::now();
  // The texts must outlive training: they are kept here and viewed by TrainingText.
  std::vector<std::string> texts;
  std::vector<TrainingText> named;
  if (args.data.empty()) {
    texts.push_back(read_corpus(""));
  } else {
    // A corpus name (fortunes, bible) or a file; a missing or empty file is named.
    for (const std::string& d : args.data) texts.push_back(read_corpus_sources({d}).text);
  }
  size_t bytes = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    named.push_back({.name = args.data.empty() ? std::string(kFortunesDir) : args.data[i], .text = texts[i]});
    bytes += texts[i].size();
  }
  const double read_s = seconds_since(start);
  BytePairEncoding bpe = [&] {
    try {
      return train_bpe(named, {.vocab_size = args.vocab_size, .specials = args.specials});
    } catch (const std::invalid_argument& e) {  // a size the text cannot fill, a NUL byte
      const std::string what = e.what(), op = "train_bpe: ";
      throw UsageError(what.rfind(op, 0) == 0 ? what.substr(op.size()) : what);  // the program names itself
    }
  }();
  const double total_s = seconds_since(start);
  if (args.format == "hf") {
    write_file_atomically(args.out, hf_tokenizer_json(bpe));
  } else {
    bpe.save(args.out);
  }
  char line[256];
  std::snprintf(line, sizeof line, "train_bpe: %zu merges, vocabulary %lld (%zu specials), from %zu bytes in %.2f s "
                "(reading %.2f s, training %.2f s, %d threads)\n",
                bpe.merges().size(), static_cast<long long>(bpe.vocab_size()), bpe.specials().size(), bytes, total_s,
                read_s, total_s - read_s, num_threads());
  std::cout << line << "wrote " << args.out << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Learns a byte-level BPE vocabulary (GPT-2's pre-tokenisation) from text files.",
               tool_name(argc, argv, "train_bpe")};
  app.add_option("--data", args.data,
                 "text files or corpora (fortunes, bible) to learn from (default: every fortune under "
                 "/usr/share/games/fortunes)")
      ->check(nonempty_path());
  app.add_option("--vocab-size", args.vocab_size, "tokens in all: 256 bytes + merges + specials")
      ->check(integer_in<int64_t>(256, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--special", args.specials, "a special token (repeatable), e.g. \"<|endoftext|>\"");
  app.add_option("--out", args.out, "the vocabulary file to write")->required();
  app.add_option("--format", args.format, "bpe (attograd's vocabulary file) or hf (a Hugging Face tokenizer.json)")
      ->check(CLI::IsMember({"bpe", "hf"}))
      ->capture_default_str();
  app.add_flag("--overwrite", args.overwrite, "replace an existing --out");
  add_threads_flag(app, args.threads, "threads for counting the text's chunks");
  return tool_main(app, argc, argv, [&] { return run(args); });
}
