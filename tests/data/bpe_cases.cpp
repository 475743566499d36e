// Our ids for every case of a cases file (tests/data/gpt2_reference.js writes it): one line of
// space-separated ids per case, in order, on stdout. Checks on the way that each case decodes
// back to its bytes, and that two threads give the ids of one; exits 1 naming the first case
// that does not.
//
//   bpe_cases CASES gpt2|VOCABULARY-FILE > ours.txt
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "attograd/core/parallel.h"
#include "attograd/core/threads.h"
#include "attograd/text/bpe.h"
#include "attograd/train/io/atomic_file.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: bpe_cases CASES gpt2|VOCABULARY-FILE\n";
    return 2;
  }
  try {
    using namespace ag;
    const std::string tokenizer = argv[2];
    const BytePairEncoding bpe = tokenizer == "gpt2" ? BytePairEncoding::gpt2() : BytePairEncoding::load(tokenizer);
    set_num_threads(2);
    detail::force_excess(0);  // two parts even when other programs hold the cores
    const std::string data = read_file(argv[1]);
    std::string out;
    size_t cases = 0;
    for (size_t pos = 0; pos < data.size(); ++cases) {
      const size_t name_end = data.find('\n', pos), size_end = data.find('\n', name_end + 1);
      const std::string name = data.substr(pos, name_end - pos);
      const size_t size = std::stoul(data.substr(name_end + 1, size_end - name_end - 1));
      const std::string text = data.substr(size_end + 1, size);
      pos = size_end + 1 + size + 1;
      const std::vector<int64_t> ids = bpe.encode(text);
      if (bpe.decode(ids) != text) {
        std::cerr << "bpe_cases: case \"" << name << "\" does not decode to its own bytes\n";
        return 1;
      }
      if (bpe.encode(text, 2) != ids) {
        std::cerr << "bpe_cases: case \"" << name << "\" has other ids on two threads\n";
        return 1;
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) out += ' ';
        out += std::to_string(ids[i]);
      }
      out += '\n';
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (std::fflush(stdout) != 0) return 1;
    std::cerr << "bpe_cases: " << cases << " cases encoded, each decoding to its own bytes\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bpe_cases: error: " << e.what() << "\n";
    return 1;
  }
}
