// tokenize: a file's token ids with GPT-2's byte-pair encoding, a vocabulary trained by
// train_bpe or a Hugging Face tokenizer.json (byte-level BPE: Llama 3, Qwen, ...), one id a line;
// --decode reads such ids back and writes the text.
//
//   build/tools/tokenize --tokenizer gpt2 notes.txt > notes.ids
//   build/tools/tokenize --tokenizer gpt2 --decode notes.ids > notes.txt
//   build/tools/tokenize --tokenizer fortunes.bpe notes.txt | wc -l          # count tokens
//   build/tools/tokenize --tokenizer Llama-3/tokenizer.json notes.txt
//
// FILE "-" is standard input. Every write to stdout is checked (a full disk or a closed pipe is
// an error, exit 1). Exit codes: 0 done, 1 error (a file, the vocabulary, stdout), 2 bad
// command line or ids.
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "attograd/core/threads.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/train/io/atomic_file.h"
#include "common/threads_flag.h"
#include "common/tool_main.h"

namespace {

using namespace ag;

struct Args {
  std::string tokenizer = "gpt2";
  std::string file;
  bool decode = false;
  std::string threads = "auto";
};

std::string read_input(const std::string& file) {
  if (file != "-") return read_file(file);  // names the file in its error
  // Standard input has no size to check first: it is read up to a bound, so that an endless one
  // (/dev/zero, `yes`) ends in a message instead of all the memory.
  constexpr size_t kBound = size_t{1} << 28;
  std::string text;
  char block[1 << 16];
  while (std::cin.read(block, sizeof block) || std::cin.gcount() > 0) {
    text.append(block, static_cast<size_t>(std::cin.gcount()));
    if (text.size() > kBound) {
      throw std::runtime_error("standard input holds more than " + std::to_string(kBound) +
                               " bytes; give a text this large as a file (or to prepare_text)");
    }
  }
  if (std::cin.bad()) throw std::runtime_error("cannot read standard input");
  return text;
}

// The ids of `text`: integers separated by whitespace. Usage naming the file and the line.
std::vector<int64_t> parse_ids(const std::string& text, const std::string& file) {
  std::vector<int64_t> ids;
  size_t line = 1;
  for (size_t pos = 0; pos < text.size();) {
    const char c = text[pos];
    if (c == '\n') ++line;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++pos;
      continue;
    }
    int64_t id = 0;
    const auto [end, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), id);
    const bool ends_well = end == text.data() + text.size() || std::strchr(" \t\r\n", *end) != nullptr;
    if (ec != std::errc() || !ends_well) {
      const size_t stop = text.find_first_of(" \t\r\n", pos);
      throw UsageError("--decode: '" + file + "' line " + std::to_string(line) + ": \"" + text.substr(pos, stop - pos) +
                  "\" is not a token id");
    }
    ids.push_back(id);
    pos = static_cast<size_t>(end - text.data());
  }
  return ids;
}

void print(std::string_view text) {
  const int err = write_all(STDOUT_FILENO, text.data(), text.size());
  if (err != 0) throw std::runtime_error(std::string("cannot write to standard output: ") + std::strerror(err));
}

int run(const Args& args) {
  if (args.tokenizer.empty()) throw UsageError("--tokenizer: is empty (gpt2, a file written by train_bpe or a tokenizer.json)");
  set_num_threads(parse_threads(args.threads));
  const Tokenizer tokenizer = load_tokenizer(args.tokenizer);
  const std::string input = read_input(args.file);
  if (args.decode) {
    const std::vector<int64_t> ids = parse_ids(input, args.file);
    for (int64_t id : ids) {
      if (id < 0 || id >= tokenizer.vocab_size()) {
        throw UsageError("--decode: '" + args.file + "' holds id " + std::to_string(id) + ", outside the " +
                    std::to_string(tokenizer.vocab_size()) + " tokens of " + args.tokenizer);
      }
    }
    print(tokenizer.decode(ids));
    return 0;
  }
  std::string out;
  for (int64_t id : tokenizer.encode(input)) {  // on num_threads() threads
    out += std::to_string(id);
    out += '\n';
  }
  print(out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Writes a file's token ids, one a line (or, with --decode, the text of a file of ids).",
               tool_name(argc, argv, "tokenize")};
  app.add_option("--tokenizer", args.tokenizer, "gpt2 (GPT-2's vocabulary), a file written by train_bpe, or a Hugging Face tokenizer.json")
      ->capture_default_str();
  app.add_flag("--decode", args.decode, "read token ids (whitespace-separated) and write their text");
  app.add_option("FILE", args.file, "the text (or ids with --decode); - reads standard input")->required();
  add_threads_flag(app, args.threads, "threads for encoding long texts");
  return tool_main(app, argc, argv, [&] { return run(args); });
}
