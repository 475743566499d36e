#include "attograd/models/llama/llama_generate.h"

#include <algorithm>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"

namespace ag {

LlamaDecoder::LlamaDecoder(Llama& model, const DecodeOptions& options, int64_t context)
    : model_(model), options_(options), context_(context == 0 ? model.options().max_positions : context) {
  if (context_ < 1 || context_ > model.options().max_positions) {
    throw std::invalid_argument("LlamaDecoder: context must lie in [1, max_positions=" +
                                std::to_string(model.options().max_positions) + "], got " + std::to_string(context));
  }
  check_window_shift(options.window_shift, context_, "LlamaDecoder");
  if (options.use_cache) cache_.emplace(model.make_cache(1, context_));
}

std::vector<double> LlamaDecoder::feed(const std::vector<int64_t>& tokens) {
  check_token_ids(tokens, model_.options().vocab, "LlamaDecoder::feed", "tokens to feed");
  NoGradGuard no_grad;
  const int64_t previous_start = start_;
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  const int64_t end = static_cast<int64_t>(tokens_.size());
  const int64_t excess = end - start_ - context_;
  if (excess > 0) {
    const int64_t shift = options_.window_shift;
    start_ += (excess + shift - 1) / shift * shift;
  }
  // With the cache and an unmoved window only the new tokens go through the model; otherwise
  // the whole window, from position 0 (and the cache is rebuilt from it).
  int64_t from = start_;
  if (cache_) {
    if (start_ != previous_start) cache_->reset();
    else from = end - static_cast<int64_t>(tokens.size());
  }
  const int64_t n = end - from;
  const Indices ids(Shape{1, n}, std::vector<int64_t>(tokens_.begin() + from, tokens_.end()));
  const Variable logits = cache_ ? model_.forward(ids, *cache_) : model_.forward(ids);  // (1, n, V)
  return logits.value().select(0, 0).select(0, n - 1).to_vector();
}

std::vector<int64_t> generate(Llama& model, const std::vector<int64_t>& prompt, const GenerateOptions& o) {
  const int64_t max_positions = model.options().max_positions;
  check_generate_options(o, prompt, model.options().vocab, max_positions, "max_positions");
  if (o.max_new_tokens == 0) return {};
  const int64_t needed = static_cast<int64_t>(prompt.size()) + o.max_new_tokens;
  EvalModeGuard eval(model);
  LlamaDecoder decoder(model, DecodeOptions{o.use_cache, o.window_shift},
                       std::min(max_positions, std::max(needed, o.window_shift)));
  return generate_with(decoder, prompt, o);
}

std::vector<int64_t> Llama::generate(const std::vector<int64_t>& prompt, const GenerateOptions& options) {
  return ag::generate(*this, prompt, options);
}

}  // namespace ag
