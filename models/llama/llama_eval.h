// The Llama family's score of a text (train/text_score.h): sliding windows of at most
// max_positions tokens, each token scored once; nats per token, perplexity and bits per byte.
//
//   TextScore s = sliding_window_perplexity(model, tokens, tokenizer.token_bytes(), {.window = 1024, .stride = 512});
//
// token_bytes may have fewer entries than the model's vocabulary (a table padded past the
// tokenizer's ids, as Qwen's is); every token must be below its size. The model runs in eval
// mode without a graph (its mode is restored).
#pragma once

#include <cstdint>
#include <vector>

#include "attograd/models/llama/llama.h"
#include "attograd/train/text_score.h"

namespace ag {

TextScore sliding_window_perplexity(Llama& model, const std::vector<int64_t>& tokens,
                                    const std::vector<int64_t>& token_bytes, const SlidingWindowOptions& options,
                                    const Ranks& ranks = Ranks(), const WindowProgress& on_batch = {});

}  // namespace ag
