#include "attograd/train/text_score.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "attograd/autograd/grad_mode.h"

namespace ag {

namespace {

// -ln softmax(row)[target], in double: the row's max taken out before the exponentials.
template <typename T>
double nats_of(const T* row, int64_t vocab, int64_t target) {
  double top = row[0];
  for (int64_t v = 1; v < vocab; ++v) top = std::max(top, static_cast<double>(row[v]));
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
  return top + std::log(sum) - static_cast<double>(row[target]);
}

// The nats of window `w`'s scored tokens, from `logits` (rows, T, V) of its row `r`: position t
// of the window predicts token begin + t + 1.
double window_nats(const Tensor& logits, int64_t r, const ScoredWindow& w, const std::vector<int64_t>& tokens) {
  const int64_t T = logits.shape()[1], V = logits.shape()[2];
  double nats = 0;
  for (int64_t i = w.first_scored; i < w.end; ++i) {
    const int64_t t = i - w.begin - 1;  // the position whose output predicts token i
    const int64_t offset = (r * T + t) * V;
    const int64_t target = tokens[static_cast<size_t>(i)];
    nats += logits.dtype() == DType::f32 ? nats_of(logits.data<float>() + offset, V, target)
                                         : nats_of(logits.data<double>() + offset, V, target);
  }
  return nats;
}

}  // namespace

std::vector<ScoredWindow> sliding_windows(int64_t tokens, int64_t window, int64_t stride) {
  if (tokens < 2) {
    throw std::invalid_argument("sliding_window_perplexity: the text has " + std::to_string(tokens) +
                                " token(s); scoring needs at least 2 (one to predict from, one to predict)");
  }
  if (window < 2) {
    throw std::invalid_argument("sliding_window_perplexity: the window must hold at least 2 tokens, got " +
                                std::to_string(window));
  }
  if (stride < 1 || stride > window) {
    throw std::invalid_argument("sliding_window_perplexity: the stride " + std::to_string(stride) +
                                " must lie in [1, window = " + std::to_string(window) +
                                "] (a stride above the window would leave tokens unscored)");
  }
  std::vector<ScoredWindow> out;
  int64_t previous_end = 0;
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + window, tokens);
    const int64_t first = std::max(previous_end, begin + 1);
    if (first < end) out.push_back({.begin = begin, .end = end, .first_scored = first});
    previous_end = end;
    if (end == tokens) break;
  }
  return out;
}

TextScore sliding_window_score(const WindowLogits& logits_of, int64_t context, int64_t vocab,
                               const std::vector<int64_t>& tokens, const std::vector<int64_t>& token_bytes,
                               const SlidingWindowOptions& options, const Ranks& ranks, const WindowProgress& on_batch) {
  const int64_t window = options.window == 0 ? context : options.window;
  if (window > context) {
    throw std::invalid_argument("sliding_window_perplexity: the window " + std::to_string(window) +
                                " is longer than the model's context (" + std::to_string(context) + ")");
  }
  if (options.batch < 1) {
    throw std::invalid_argument("sliding_window_perplexity: the batch must be at least 1, got " +
                                std::to_string(options.batch));
  }
  if (static_cast<int64_t>(token_bytes.size()) > vocab) {
    throw std::invalid_argument("sliding_window_perplexity: token_bytes has " + std::to_string(token_bytes.size()) +
                                " entries for a vocabulary of " + std::to_string(vocab));
  }
  const auto known = static_cast<int64_t>(token_bytes.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= known) {
      throw std::invalid_argument("sliding_window_perplexity: token " + std::to_string(i) + " is " +
                                  std::to_string(tokens[i]) + ", outside the vocabulary [0, " + std::to_string(known) +
                                  ")");
    }
  }
  const std::vector<ScoredWindow> windows = sliding_windows(static_cast<int64_t>(tokens.size()), window, options.stride);
  const Shard mine = ranks.part(static_cast<int64_t>(windows.size()));
  double nats = 0;
  int64_t scored = 0, bytes = 0;
  // Windows of one length go through the model together (all but possibly the last are full).
  for (int64_t i = mine.begin; i < mine.begin + mine.rows;) {
    const int64_t length = windows[static_cast<size_t>(i)].end - windows[static_cast<size_t>(i)].begin;
    // A window's last token predicts nothing inside it: its first length - 1 tokens go in.
    int64_t rows = 0;
    std::vector<int64_t> ids;
    while (i + rows < mine.begin + mine.rows && rows < options.batch) {
      const ScoredWindow& w = windows[static_cast<size_t>(i + rows)];
      if (w.end - w.begin != length) break;
      ids.insert(ids.end(), tokens.begin() + w.begin, tokens.begin() + w.end - 1);
      ++rows;
    }
    const Tensor logits = logits_of(Indices(Shape{rows, length - 1}, std::move(ids))).contiguous();
    for (int64_t r = 0; r < rows; ++r) {
      const ScoredWindow& w = windows[static_cast<size_t>(i + r)];
      nats += window_nats(logits, r, w, tokens);
      scored += w.end - w.first_scored;
      for (int64_t t = w.first_scored; t < w.end; ++t) bytes += token_bytes[static_cast<size_t>(tokens[static_cast<size_t>(t)])];
    }
    i += rows;
    if (on_batch) on_batch(i - mine.begin, mine.rows);
  }
  std::vector<double> sums{nats, static_cast<double>(scored), static_cast<double>(bytes)};
  if (ranks.size() > 1) ranks.sum(sums);
  return {.windows = static_cast<int64_t>(windows.size()), .tokens = static_cast<int64_t>(sums[1]),
          .bytes = static_cast<int64_t>(sums[2]), .nats = sums[0]};
}

TextScore sliding_window_perplexity(LanguageModel& model, const std::vector<int64_t>& tokens,
                                    const std::vector<int64_t>& token_bytes, const SlidingWindowOptions& options,
                                    const Ranks& ranks, const WindowProgress& on_batch) {
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model);
  return sliding_window_score([&model](const Indices& ids) { return model.forward(ids).value(); },
                              model.context_length(), model.vocab_size(), tokens, token_bytes, options, ranks, on_batch);
}

}  // namespace ag
