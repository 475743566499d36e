// Token shards: the batches read from a stream of shards (token_shards.h): the training windows
// in order, and the evaluation's evenly spaced ones.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/text/token_shards.h"

namespace ag {

namespace {

void check_batch(const char* op, const TokenStream& tokens, const TextBatchOptions& o) {
  if (o.batch < 1) throw std::invalid_argument(std::string(op) + ": batch must be >= 1, got " + std::to_string(o.batch));
  if (o.block_size < 1) {
    throw std::invalid_argument(std::string(op) + ": block_size must be >= 1, got " + std::to_string(o.block_size));
  }
  if (tokens.size() < static_cast<uint64_t>(o.block_size) + 1) {
    throw std::invalid_argument(std::string(op) + ": the shards hold " + std::to_string(tokens.size()) +
                                " tokens but a window needs block_size + 1 = " + std::to_string(o.block_size + 1));
  }
}

TextBatch zero_batch(int64_t rows, int64_t block) {
  const std::vector<int64_t> zeros(static_cast<size_t>(rows * block), 0);
  return TextBatch{.inputs = Indices(Shape{rows, block}, zeros), .targets = Indices(Shape{rows, block}, zeros)};
}

// Row `row` of `out` from the window of block + 1 tokens at `start`.
void fill_window(const TokenStream& tokens, uint64_t start, int64_t block, int64_t row, std::vector<int64_t>& buf,
                 TextBatch& out) {
  tokens.read(start, static_cast<uint64_t>(block) + 1, buf.data());
  const auto at = static_cast<std::ptrdiff_t>(row * block);
  std::copy(buf.begin(), buf.begin() + block, out.inputs.data.begin() + at);
  std::copy(buf.begin() + 1, buf.begin() + block + 1, out.targets.data.begin() + at);
}

}  // namespace

TextBatch sequential_batch(const TokenStream& tokens, const TextBatchOptions& options, int64_t step, int64_t rows_begin,
                           int64_t rows) {
  check_batch("sequential_batch", tokens, options);
  if (step < 0) throw std::invalid_argument("sequential_batch: step must be >= 0, got " + std::to_string(step));
  const uint64_t block = static_cast<uint64_t>(options.block_size);
  const uint64_t windows = (tokens.size() - 1) / block;
  TextBatch out = zero_batch(rows, options.block_size);
  std::vector<int64_t> buf(block + 1);
  for (int64_t r = 0; r < rows; ++r) {
    __extension__ typedef unsigned __int128 Uint128;
    const Uint128 w = static_cast<Uint128>(step) * static_cast<uint64_t>(options.batch) + static_cast<uint64_t>(rows_begin + r);
    fill_window(tokens, static_cast<uint64_t>(w % windows) * block, options.block_size, r, buf, out);
  }
  return out;
}

std::vector<TextBatch> shard_eval_batches(const TokenStream& tokens, const TextBatchOptions& options,
                                          int64_t max_windows) {
  check_batch("shard_eval_batches", tokens, options);
  if (max_windows < 1) {
    throw std::invalid_argument("shard_eval_batches: max_windows must be >= 1, got " + std::to_string(max_windows));
  }
  // eval_batches' placement (text.cpp), over the stream.
  const uint64_t last_start = tokens.size() - static_cast<uint64_t>(options.block_size) - 1;
  uint64_t windows = std::min(static_cast<uint64_t>(max_windows), last_start + 1);
  const uint64_t batch = static_cast<uint64_t>(options.batch);
  if (windows >= batch) windows -= windows % batch;
  std::vector<TextBatch> out;
  std::vector<int64_t> buf(static_cast<size_t>(options.block_size) + 1);
  for (uint64_t first = 0; first < windows; first += batch) {
    const uint64_t rows = std::min(batch, windows - first);
    TextBatch b = zero_batch(static_cast<int64_t>(rows), options.block_size);
    for (uint64_t r = 0; r < rows; ++r) {
      __extension__ typedef unsigned __int128 Uint128;
      const uint64_t i = first + r;
      const uint64_t start =
          windows == 1 ? 0 : static_cast<uint64_t>(static_cast<Uint128>(i) * last_start / (windows - 1));
      fill_window(tokens, start, options.block_size, static_cast<int64_t>(r), buf, b);
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace ag
