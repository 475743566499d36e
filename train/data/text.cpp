#include "attograd/train/data/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "attograd/core/rng.h"
#include "attograd/train/io/atomic_file.h"
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

std::string read_corpus(const std::string& path) {
  if (path.empty()) return read_fortunes();
  std::string text;
  try {
    // read_file refuses directories, FIFOs and devices and names the path and the reason.
    text = read_file(path);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("read_corpus: ") + e.what());
  }
  if (text.empty()) throw std::invalid_argument("read_corpus: '" + path + "' is empty; a language model needs text to learn from");
  return text;
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
