#include "attograd/text/corpus.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <sys/wait.h>

#include "attograd/core/rng.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

// ---------------------------------------------------------------------------------------------
// Corpus

// The text with every line that is exactly "%" (the fortune separator) left out; all other
// bytes, newlines included, are kept as they are.
std::string drop_separator_lines(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t newline = text.find('\n', begin);
    const size_t end = newline == std::string::npos ? text.size() : newline + 1;
    const size_t content_end = newline == std::string::npos ? text.size() : newline;
    const bool separator = content_end - begin == 1 && text[begin] == '%';
    if (!separator) out.append(text, begin, end - begin);
    begin = end;
  }
  return out;
}

std::string read_fortunes() {
  namespace fs = std::filesystem;
  const std::string dir = kFortunesDir;
  const std::string hint = " (install Debian's fortune files with `apt-get install fortunes`, or give a text file)";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::invalid_argument("read_corpus: no fortunes directory '" + dir + "'" + hint);
  std::vector<std::string> files;
  fs::directory_iterator it(dir, ec);
  if (ec) throw std::invalid_argument("read_corpus: cannot list '" + dir + "': " + ec.message() + hint);
  for (const fs::directory_entry& entry : it) {
    // symlink_status, not status: the *.u8 names are symlinks to the plain files, and following
    // them would read every fortune twice.
    const fs::file_status st = entry.symlink_status(ec);
    if (ec || !fs::is_regular_file(st)) continue;
    const std::string name = entry.path().filename().string();
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".dat") == 0) continue;  // strfile's binary index
    files.push_back(entry.path().string());
  }
  // Directory order is whatever the file system gives; sorting makes the corpus (and so the
  // vocabulary and every batch) the same on every machine.
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::invalid_argument("read_corpus: no fortune files in '" + dir + "'" + hint);
  std::string text;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0) text += '\n';
    try {
      text += drop_separator_lines(read_file(files[i]));
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(std::string("read_corpus: ") + e.what());
    }
  }
  return text;
}

// The King James Bible as Debian's `bible` prints it with -f: one verse a line, each opening
// with its reference and a blank ("Ge1:1 In the beginning ..."). The text is kept one verse a
// line with the references left out: they are a numbering, not the text.
std::string read_bible() {
  namespace fs = std::filesystem;
  const std::string program = kBibleProgram;
  const std::string hint = " (install Debian's King James Bible with `apt-get install bible-kjv-text bible-kjv`)";
  std::error_code ec;
  if (!fs::exists(program, ec)) throw std::invalid_argument("read_corpus: no '" + program + "' to read the bible corpus" + hint);
  // A fixed command, no user text in it; stdin closed so that the program never waits for a
  // reader, stderr kept apart so a complaint is not read as scripture.
  const std::string command = program + " -f Gen1:1-Rev22:21 </dev/null 2>/dev/null";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::invalid_argument("read_corpus: cannot run '" + command + "'" + hint);
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (status != 0 || out.empty()) {
    const std::string how = status == -1          ? "could not be waited for"
                            : WIFEXITED(status)   ? "exited with status " + std::to_string(WEXITSTATUS(status))
                            : WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                                  : "ended with wait status " + std::to_string(status);
    throw std::invalid_argument("read_corpus: '" + command + "' " + how + " after " + std::to_string(out.size()) +
                                " bytes of output" + hint);
  }
  std::string text;
  text.reserve(out.size());
  size_t begin = 0, verses = 0;
  while (begin < out.size()) {
    const size_t newline = out.find('\n', begin);
    const size_t end = newline == std::string::npos ? out.size() : newline;
    const size_t blank = out.find(' ', begin);
    const size_t colon = out.find(':', begin);
    // "Ge1:1 ", "1Co13:4 ": a reference is letters, digits and one colon, closed by a blank.
    if (blank >= end || colon >= blank || blank == begin) {
      throw std::runtime_error("read_corpus: '" + program + "' printed a line without a verse reference, line " +
                               std::to_string(verses + 1) + ": '" + out.substr(begin, std::min<size_t>(end - begin, 80)) + "'");
    }
    text.append(out, blank + 1, end - blank - 1);
    text += '\n';
    ++verses;
    begin = end + 1;
  }
  return text;
}

// The NUL bytes of a source: no text holds one (a binary file does, and UTF-16 text).
void refuse_nul(const std::string& name, const std::string& text) {
  const size_t at = text.find('\0');
  if (at != std::string::npos) {
    throw std::invalid_argument("read_corpus: '" + name + "' holds a NUL byte at offset " + std::to_string(at) +
                                " of its " + std::to_string(text.size()) +
                                " bytes: it is not text (a binary file, or UTF-16: convert it to UTF-8)");
  }
}

std::string read_source(const std::string& source) {
  std::string text;
  if (source.empty() || source == "fortunes") {
    text = read_fortunes();
  } else if (source == "bible") {
    text = read_bible();
  } else {
    try {
      // read_file refuses directories, FIFOs and devices and names the path and the reason.
      text = read_file(source);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(std::string("read_corpus: ") + e.what());
    }
    if (text.empty()) {
      throw std::invalid_argument("read_corpus: '" + source + "' is empty; a language model needs text to learn from");
    }
  }
  refuse_nul(source.empty() ? "fortunes" : source, text);
  return text;
}

// ---------------------------------------------------------------------------------------------
// Batches

__extension__ typedef unsigned __int128 Uint128;

// floor(a * b / c) without overflow, for c > 0 and a <= c (so the result fits).
uint64_t scale(uint64_t a, uint64_t b, uint64_t c) {
  return static_cast<uint64_t>(static_cast<Uint128>(a) * b / c);
}

// The stream call number of the batch windows: far beyond the few calls a model's step makes
// (each dropout, each initialiser), so the windows are independent of the model's own random
// draws even when the trainer uses the same seed and step.
constexpr uint64_t kBatchCall = uint64_t{1} << 62;

void check_batch_options(const std::string& op, const std::vector<int64_t>& tokens, const TextBatchOptions& o) {
  if (o.batch < 1) throw std::invalid_argument(op + ": batch must be >= 1, got " + std::to_string(o.batch));
  if (o.block_size < 1) throw std::invalid_argument(op + ": block_size must be >= 1, got " + std::to_string(o.block_size));
  const uint64_t n = tokens.size();
  if (n < static_cast<uint64_t>(o.block_size) + 1) {
    throw std::invalid_argument(op + ": the text has " + std::to_string(n) + " tokens but a window needs block_size + 1 = " +
                                std::to_string(o.block_size + 1) +
                                " (the text is too short for the context: lower --block-size or give more text)");
  }
}

// Copies the window starting at `start` into row `row` of the inputs and targets.
void fill_row(const std::vector<int64_t>& tokens, int64_t block, uint64_t start, int64_t row, TextBatch& out) {
  const auto src = tokens.begin() + static_cast<std::ptrdiff_t>(start);
  const auto dst = static_cast<std::ptrdiff_t>(row * block);
  std::copy(src, src + block, out.inputs.data.begin() + dst);
  std::copy(src + 1, src + 1 + block, out.targets.data.begin() + dst);
}

TextBatch empty_batch(int64_t rows, int64_t block) {
  const std::vector<int64_t> zeros(static_cast<size_t>(rows * block), 0);
  return TextBatch{.inputs = Indices(Shape{rows, block}, zeros), .targets = Indices(Shape{rows, block}, zeros)};
}

}  // namespace

bool is_corpus_name(const std::string& source) { return source == "fortunes" || source == "bible"; }

std::string read_corpus(const std::string& path) {
  // A path that happens to be a corpus name is a file here: read_corpus_sources gives names
  // their meaning.
  if (path.empty()) return read_source("");
  return read_source(is_corpus_name(path) ? "./" + path : path);
}

Corpus read_corpus_sources(const std::vector<std::string>& sources) {
  if (sources.empty()) return read_corpus_sources({"fortunes"});
  Corpus corpus;
  for (const std::string& source : sources) {
    if (source.empty()) throw std::invalid_argument("read_corpus: an empty path among the sources");
    const std::string text = read_source(source);
    if (!corpus.text.empty() && corpus.text.back() != '\n') corpus.text += '\n';
    corpus.text += text;
    const std::string name = is_corpus_name(source) ? source : std::filesystem::path(source).filename().string();
    corpus.parts.push_back({.name = name, .bytes = static_cast<int64_t>(text.size()), .crc32c = crc32c(text.data(), text.size())});
  }
  return corpus;
}

// ---------------------------------------------------------------------------------------------
// Split and batches

TextSplit split_tokens(const std::vector<int64_t>& tokens, double train_fraction) {
  if (!(train_fraction > 0.0 && train_fraction < 1.0)) {
    throw std::invalid_argument("split_tokens: train_fraction must be in (0, 1), got " + std::to_string(train_fraction));
  }
  const size_t n = tokens.size();
  const size_t cut = std::min(n, static_cast<size_t>(std::floor(static_cast<double>(n) * train_fraction)));
  const auto mid = tokens.begin() + static_cast<std::ptrdiff_t>(cut);
  return TextSplit{.train = std::vector<int64_t>(tokens.begin(), mid), .val = std::vector<int64_t>(mid, tokens.end())};
}

TextBatch sample_batch(const std::vector<int64_t>& tokens, const TextBatchOptions& options, uint64_t seed, int64_t step) {
  check_batch_options("sample_batch", tokens, options);
  if (step < 0) throw std::invalid_argument("sample_batch: step must be >= 0, got " + std::to_string(step));
  // Starts are uniform in [0, n - block_size - 1]: `range` choices.
  const uint64_t range = tokens.size() - static_cast<uint64_t>(options.block_size);
  Generator gen(seed);
  gen.set_state(GeneratorState{.seed = seed, .step = static_cast<uint64_t>(step), .call = kBatchCall});
  const uint64_t key = gen.next_stream();
  TextBatch out = empty_batch(options.batch, options.block_size);
  for (int64_t b = 0; b < options.batch; ++b) {
    // The high 64 bits of bits * range (Lemire's multiply-shift): uniform up to a bias of
    // range / 2^64, far below anything a corpus size can show, and no division or retry loop,
    // so each start is a pure function of (seed, step, b).
    const uint64_t start = static_cast<uint64_t>((static_cast<Uint128>(Generator::bits(key, static_cast<uint64_t>(b))) * range) >> 64);
    fill_row(tokens, options.block_size, start, b, out);
  }
  return out;
}

std::vector<TextBatch> eval_batches(const std::vector<int64_t>& tokens, const TextBatchOptions& options, int64_t max_windows) {
  check_batch_options("eval_batches", tokens, options);
  if (max_windows < 1) throw std::invalid_argument("eval_batches: max_windows must be >= 1, got " + std::to_string(max_windows));
  const uint64_t last_start = tokens.size() - static_cast<uint64_t>(options.block_size) - 1;
  uint64_t windows = std::min(static_cast<uint64_t>(max_windows), last_start + 1);
  // Whole batches only when there is text for at least one, so the mean of the batch losses is
  // the mean over all windows; shorter text gives a single, smaller batch.
  const uint64_t batch = static_cast<uint64_t>(options.batch);
  if (windows >= batch) windows -= windows % batch;
  std::vector<TextBatch> out;
  for (uint64_t first = 0; first < windows; first += batch) {
    const uint64_t rows = std::min(batch, windows - first);
    TextBatch b = empty_batch(static_cast<int64_t>(rows), options.block_size);
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t i = first + r;
      // Window i of `windows` starts at floor(i * last_start / (windows - 1)): the first at 0,
      // the last at the end of the text, the rest evenly between.
      const uint64_t start = windows == 1 ? 0 : scale(i, last_start, windows - 1);
      fill_row(tokens, options.block_size, start, static_cast<int64_t>(r), b);
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<TextBatch> tiled_batches(const std::vector<int64_t>& tokens, const TextBatchOptions& options) {
  check_batch_options("tiled_batches", tokens, options);
  const uint64_t block = static_cast<uint64_t>(options.block_size);
  const uint64_t windows = (tokens.size() - 1) / block;
  const uint64_t batch = static_cast<uint64_t>(options.batch);
  std::vector<TextBatch> out;
  for (uint64_t first = 0; first < windows; first += batch) {
    const uint64_t rows = std::min(batch, windows - first);
    TextBatch b = empty_batch(static_cast<int64_t>(rows), options.block_size);
    for (uint64_t r = 0; r < rows; ++r) fill_row(tokens, options.block_size, (first + r) * block, static_cast<int64_t>(r), b);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace ag
