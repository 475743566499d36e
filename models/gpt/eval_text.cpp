#include "attograd/models/gpt/eval_text.h"

#include <stdexcept>
#include <string>

namespace ag {

TextScore sliding_window_perplexity(GPT& model, const std::vector<int64_t>& tokens,
                                    const std::vector<int64_t>& token_bytes, const SlidingWindowOptions& options,
                                    const Ranks& ranks, const WindowProgress& on_batch) {
  const GPTOptions& m = model.options();
  if (options.window > m.block_size) {
    throw std::invalid_argument("sliding_window_perplexity: the window " + std::to_string(options.window) +
                                " is longer than the model's context (block_size " + std::to_string(m.block_size) + ")");
  }
  if (static_cast<int64_t>(token_bytes.size()) != m.vocab) {
    throw std::invalid_argument("sliding_window_perplexity: token_bytes has " + std::to_string(token_bytes.size()) +
                                " entries for a vocabulary of " + std::to_string(m.vocab));
  }
  return sliding_window_perplexity(static_cast<LanguageModel&>(model), tokens, token_bytes, options, ranks, on_batch);
}

}  // namespace ag
