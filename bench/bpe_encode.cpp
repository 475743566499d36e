// Encoding speed of the byte-pair encoder: one file encoded `--repeat` times (each a fresh call,
// so the chunk cache starts empty every time), the median in MB/s (10^6 bytes of input per
// second). The vocabulary's loading is not timed. bench/compare_bpe.sh runs it next to npm's
// tiktoken and js-tiktoken, bench/compare_hf_bpe.sh with a tokenizer.json next to @lenml/tokenizers.
//
//   build/bench/bpe_encode --tokenizer gpt2 --threads 2 --repeat 5 text.txt
//   build/bench/bpe_encode --tokenizer ~/.cache/attograd/hf/llama3/tokenizer.json text.txt
//   -> attograd threads=2 bytes=7305072 tokens=2134323 median_s=0.3012 MB/s=24.25
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "attograd/core/threads.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/train/io/atomic_file.h"

int main(int argc, char** argv) {
  std::string tokenizer = "gpt2", file;
  int threads = 1, repeat = 5;
  CLI::App app{"Times BytePairEncoding::encode on a file."};
  app.add_option("--tokenizer", tokenizer, "gpt2, a file written by train_bpe or a tokenizer.json")->capture_default_str();
  app.add_option("--threads", threads, "threads for encoding")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--repeat", repeat, "timed encodings; the median is reported")->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("FILE", file, "the text")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    using namespace ag;
    set_num_threads(threads);
    const Tokenizer encoder = load_tokenizer(tokenizer);  // encodes on num_threads() threads
    const std::string text = read_file(file);
    std::vector<double> seconds;
    size_t tokens = 0;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      tokens = encoder.encode(text).size();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    std::printf("attograd threads=%d bytes=%zu tokens=%zu median_s=%.4f MB/s=%.2f\n", threads, text.size(), tokens,
                median, static_cast<double>(text.size()) / median / 1e6);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bpe_encode: error: " << e.what() << "\n";
    return 1;
  }
}
