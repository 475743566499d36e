// Text generation with a GPT: sampling, the sliding context window and the KV cache.
//
//   GenerateOptions options;
//   options.max_new_tokens = 200;
//   options.sampling = {.temperature = 0.8, .top_k = 40, .seed = 7};
//   options.on_token = [](int64_t token) { std::cout << decode(token) << std::flush; return true; };
//   std::vector<int64_t> continuation = generate(model, prompt_ids, options);
//
// Sampling (sample_token, SamplingOptions, GenerateOptions) is every family's: layers/decoding.h.
//
// The context window: the model sees at most block_size tokens. While the sequence fits, the
// window is the whole sequence. When it would exceed block_size, the window's start moves on by
// window_shift tokens (as often as needed), and positions count from the window's start, so
// with the default shift of 1 every prediction uses exactly the last block_size tokens at
// positions 0 .. block_size-1, as nanoGPT's crop does.
//
// The KV cache: with use_cache, each new token costs one position through the model (its
// projections and attention over the cached keys) instead of a forward over the window. When
// the window moves, every cached key and value is stale (each token's position, hence its
// embedding, changed), so the cache is reset and the new window is recomputed in one forward.
// This keeps cached and uncached logits equal (tests: f64 to 1e-10 at every step, across slides)
// at the price of one full window per token once the sequence is longer than block_size with a
// shift of 1; a larger window_shift recomputes only every window_shift tokens, the window then
// shrinking to block_size - window_shift + 1 tokens right after a move.
//
// Decoding runs under NoGradGuard; generate() puts the model in eval mode (no dropout) for its
// duration and restores the mode afterwards. One sequence at a time (batch 1).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "attograd/layers/decoding.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/models/gpt/gpt.h"

namespace ag {

// One sequence being decoded: it holds the tokens so far, the window and (with use_cache) the
// KV cache, and returns the logits that predict the next token. Does not change the model's
// mode: decode in eval mode (generate() does) unless dropout is 0.
class GPTDecoder : public TokenDecoder {
 public:
  explicit GPTDecoder(GPT& model, const DecodeOptions& options = {});

  // Appends tokens (at least one, each in [0, vocab)) to the sequence and returns the logits
  // (V) of its last position, computed from the window tokens()[window_start(), end).
  std::vector<double> feed(const std::vector<int64_t>& tokens) override;

  const std::vector<int64_t>& tokens() const { return tokens_; }
  int64_t window_start() const { return start_; }
  // The cache (use_cache only, else null): it holds the window's keys and values.
  const KvCache* cache() const { return cache_ ? &*cache_ : nullptr; }
  // Positions run through the model so far (the work done): with the cache, each new token
  // inside the window costs one.
  int64_t positions_computed() const { return positions_computed_; }

 private:
  GPT& model_;
  DecodeOptions options_;
  std::optional<KvCache> cache_;
  std::vector<int64_t> tokens_;
  int64_t start_ = 0;
  int64_t positions_computed_ = 0;
};

// The new tokens (not the prompt) continuing `prompt` (at least one token, each in [0, vocab)).
// Every option is checked before the model runs (std::invalid_argument naming it).
std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, const GenerateOptions& options);

}  // namespace ag
