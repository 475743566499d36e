#include "attograd/models/llama/llama_eval.h"

#include "attograd/autograd/grad_mode.h"

namespace ag {

TextScore sliding_window_perplexity(Llama& model, const std::vector<int64_t>& tokens,
                                    const std::vector<int64_t>& token_bytes, const SlidingWindowOptions& options,
                                    const Ranks& ranks, const WindowProgress& on_batch) {
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model);
  const LlamaOptions& o = model.options();
  return sliding_window_score([&model](const Indices& ids) { return model(ids).value(); }, o.max_positions, o.vocab,
                              tokens, token_bytes, options, ranks, on_batch);
}

}  // namespace ag
