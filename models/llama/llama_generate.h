// Text generation with a Llama-family model: its TokenDecoder (layers/decoding.h) and generate().
//
//   std::vector<int64_t> continuation = generate(model, prompt_ids, options);   // GenerateOptions
//
// The window: the model sees at most `context` tokens (max_positions, or less: a generation
// needs no cache longer than its prompt and new tokens). While the sequence fits, every new token
// costs one position through the model with the cache (the rotation of its query and key starts
// where the cache ends). When the sequence outgrows the window, the window moves on by
// window_shift tokens and is recomputed from position 0 in one forward, as GPTDecoder does, so
// the cached and uncached paths (use_cache false: the whole window every token) give the same
// logits and the same tokens. Runs under NoGradGuard; generate() puts the model in eval mode.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "attograd/layers/decoding.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/models/llama/llama.h"

namespace ag {

class LlamaDecoder : public TokenDecoder {
 public:
  // context: the window, in [1, max_positions]; 0 means max_positions.
  LlamaDecoder(Llama& model, const DecodeOptions& options = {}, int64_t context = 0);
  std::vector<double> feed(const std::vector<int64_t>& tokens) override;
  const std::vector<int64_t>& tokens() const { return tokens_; }
  int64_t window_start() const { return start_; }
  int64_t context() const { return context_; }

 private:
  Llama& model_;
  DecodeOptions options_;
  int64_t context_;
  std::optional<KvCache> cache_;
  std::vector<int64_t> tokens_;
  int64_t start_ = 0;
};

// The new tokens continuing `prompt`; every option is checked first (std::invalid_argument).
// The window is max_positions, or prompt + max_new_tokens when that is shorter.
std::vector<int64_t> generate(Llama& model, const std::vector<int64_t>& prompt, const GenerateOptions& options);

}  // namespace ag
