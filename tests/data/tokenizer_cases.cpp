// Our ids for every case of a cases file (gpt2_reference.js and hf_reference.js write them) with
// any tokenizer the programs take (text/hf_tokenizer.h's load_tokenizer): one line of
// space-separated ids per case on stdout, and each case's decoded bytes as a cases file DECODED,
// which the reference compares with its own decoding. Checks on the way that two threads give the
// ids of one and that the tokenizer's description reads back to the same ids.
//
//   tokenizer_cases CASES TOKENIZER DECODED > ours.ids
//   tokenizer_cases --write-hf gpt2|VOCABULARY-FILE OUT.json     that vocabulary as a tokenizer.json
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "attograd/core/parallel.h"
#include "attograd/core/threads.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/train/io/atomic_file.h"

int main(int argc, char** argv) {
  using namespace ag;
  try {
    if (argc == 4 && std::string(argv[1]) == "--write-hf") {
      const std::string name = argv[2];
      write_file_atomically(argv[3], hf_tokenizer_json(name == "gpt2" ? BytePairEncoding::gpt2() : BytePairEncoding::load(name)));
      return 0;
    }
    if (argc != 4) {
      std::cerr << "usage: tokenizer_cases CASES TOKENIZER DECODED | --write-hf gpt2|VOCABULARY-FILE OUT.json\n";
      return 2;
    }
    const Tokenizer tokenizer = load_tokenizer(argv[2]);
    const Tokenizer again = Tokenizer::from_json(tokenizer.to_json());
    const std::string data = read_file(argv[1]);
    std::string out, decoded;
    size_t cases = 0;
    for (size_t pos = 0; pos < data.size(); ++cases) {
      const size_t name_end = data.find('\n', pos), size_end = data.find('\n', name_end + 1);
      const std::string name = data.substr(pos, name_end - pos);
      const size_t size = std::stoul(data.substr(name_end + 1, size_end - name_end - 1));
      const std::string text = data.substr(size_end + 1, size);
      pos = size_end + 1 + size + 1;
      set_num_threads(1);
      const std::vector<int64_t> ids = tokenizer.encode(text);
      set_num_threads(2);
      detail::force_excess(0);  // two parts even when other programs hold the cores
      if (tokenizer.encode(text) != ids) {
        std::cerr << "tokenizer_cases: case \"" << name << "\" has other ids on two threads\n";
        return 1;
      }
      if (again.encode(text) != ids) {
        std::cerr << "tokenizer_cases: case \"" << name << "\" has other ids once the description is read back\n";
        return 1;
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) out += ' ';
        out += std::to_string(ids[i]);
      }
      out += '\n';
      const std::string bytes = tokenizer.decode(ids);
      decoded += name + "\n" + std::to_string(bytes.size()) + "\n" + bytes + "\n";
    }
    write_file_atomically(argv[3], decoded);
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (std::fflush(stdout) != 0) return 1;
    std::cerr << "tokenizer_cases: " << cases << " cases encoded by " << describe_tokenizer(tokenizer) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tokenizer_cases: error: " << e.what() << "\n";
    return 1;
  }
}
