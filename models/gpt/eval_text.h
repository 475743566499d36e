// Sliding-window perplexity: how well a GPT predicts a text longer than its context, the method
// Hugging Face's "Perplexity of fixed-length models" describes.
//
// The windows, the tokens each scores and the sums over processes are every family's:
// train/text_score.h.
//
//   TextScore s = sliding_window_perplexity(model, tokens, tokenizer.token_bytes(), {.stride = 512});
//   s.nats_per_token(); s.perplexity(); s.bits_per_byte();
//
// The model runs in eval mode without a graph (its mode is restored). Over several processes
// each rank scores a contiguous part of the windows and the sums are added up (Ranks::sum): every
// rank returns the same figures, equal to one process's up to the order of the additions.
#pragma once

#include <cstdint>
#include <vector>

#include "attograd/models/gpt/gpt.h"
#include "attograd/train/text_score.h"

namespace ag {

// The GPT's score of a text (train/text_score.h): windows of at most block_size tokens.
// `token_bytes`: the bytes of each token id (Tokenizer::token_bytes), one per id of the
// vocabulary. std::invalid_argument naming the values for a window above the model's block_size,
// a batch below 1, a token outside the vocabulary, and as sliding_windows.
TextScore sliding_window_perplexity(GPT& model, const std::vector<int64_t>& tokens,
                                    const std::vector<int64_t>& token_bytes, const SlidingWindowOptions& options,
                                    const Ranks& ranks = Ranks(), const WindowProgress& on_batch = {});

}  // namespace ag
