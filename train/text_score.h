// Sliding-window scoring of a text by a language model, whatever its family: how well it predicts
// a text longer than its context (Hugging Face's "Perplexity of fixed-length models"), through a
// model's logits (sliding_window_score) or any LanguageModel (sliding_window_perplexity; the
// GPT's models/gpt/eval_text.h adds its own checks on top).
//
// Windows of `window` tokens start every `stride` tokens: [0, W), [S, S+W), [2S, 2S+W), ...,
// the last one ending at the text's end (and shorter when the text is). Each token is scored
// once, by the first window that reaches it, with everything before it in that window as
// context:
//   the first window scores its tokens 1 .. W-1 (token 0 has no context);
//   a later window [b, e) scores the tokens from the previous window's end to e, its last
//   e - previous_end tokens, each predicted from at least W - S tokens of context.
// With stride = window a window's first token has no context in it and is left out (every
// other token is scored); a smaller stride scores every token but the text's first, with more
// context for each at the price of more windows. A stride above the window would skip tokens and
// is refused. Over several processes each rank scores a contiguous part of the windows and the
// sums are added up (Ranks::sum): every rank returns the same figures, equal to one process's up
// to the order of the additions.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/core/tensor.h"
#include "attograd/layers/language_model.h"
#include "attograd/train/job.h"

namespace ag {

struct SlidingWindowOptions {
  int64_t window = 0;  // tokens per window, at most the model's context; 0: the context
  int64_t stride = 0;  // in [1, window]
  int64_t batch = 8;   // windows per forward pass
};

// Called after each forward pass with this process's windows done and its share of them (for a
// progress line).
using WindowProgress = std::function<void(int64_t done, int64_t total)>;

struct TextScore {
  int64_t windows = 0;
  int64_t tokens = 0;  // tokens scored
  int64_t bytes = 0;   // the UTF-8 bytes of the scored tokens
  double nats = 0;     // the sum of -ln p(token | context) over the scored tokens

  double nats_per_token() const { return nats / static_cast<double>(tokens); }
  double perplexity() const { return std::exp(nats_per_token()); }
  // total nats / ln 2 / the bytes of the text scored
  double bits_per_byte() const { return nats / std::log(2.0) / static_cast<double>(bytes); }
};

// One window: tokens [begin, end) go in, the predictions of tokens [first_scored, end) count.
struct ScoredWindow {
  int64_t begin = 0, end = 0, first_scored = 0;
};
// The windows described above that score at least one token, for a text of `tokens` tokens.
// std::invalid_argument naming the values for a text shorter than 2 tokens, a window below 2 or
// a stride outside [1, window].
std::vector<ScoredWindow> sliding_windows(int64_t tokens, int64_t window, int64_t stride);

// The logits (rows, T, V) of ids (rows, T): a model's forward without a graph.
using WindowLogits = std::function<Tensor(const Indices& ids)>;

// The score of `tokens` under `logits`, for a model of context `context` and V = `vocab` logits
// per position. `token_bytes`: the bytes of each token id (Tokenizer::token_bytes), at most
// `vocab` entries; every token must be below its size. std::invalid_argument naming the values
// for a window above the context, a batch below 1, a token outside the vocabulary, and as
// sliding_windows. The caller puts its model in eval mode without a graph.
TextScore sliding_window_score(const WindowLogits& logits, int64_t context, int64_t vocab,
                               const std::vector<int64_t>& tokens, const std::vector<int64_t>& token_bytes,
                               const SlidingWindowOptions& options, const Ranks& ranks = Ranks(),
                               const WindowProgress& on_batch = {});

// The same for a language model of any family (layers/language_model.h): windows of at most its
// context_length(), its forward in eval mode without a graph (the model's mode is restored).
// token_bytes may have fewer entries than the model's vocabulary (a table padded past the
// tokenizer's ids, as Qwen's is).
//
//   TextScore s = sliding_window_perplexity(model, tokens, tokenizer.token_bytes(), {.window = 1024, .stride = 512});
TextScore sliding_window_perplexity(LanguageModel& model, const std::vector<int64_t>& tokens,
                                    const std::vector<int64_t>& token_bytes, const SlidingWindowOptions& options,
                                    const Ranks& ranks = Ranks(), const WindowProgress& on_batch = {});

}  // namespace ag
