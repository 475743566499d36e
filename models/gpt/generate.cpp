#include "attograd/models/gpt/generate.h"

#include "attograd/autograd/grad_mode.h"

namespace ag {

// ---- GPTDecoder ----

GPTDecoder::GPTDecoder(GPT& model, const DecodeOptions& options) : model_(model), options_(options) {
  check_window_shift(options.window_shift, model.options().block_size, "GPTDecoder", "block_size");
  if (options.use_cache) cache_.emplace(model.make_cache(1));
}

std::vector<double> GPTDecoder::feed(const std::vector<int64_t>& tokens) {
  check_token_ids(tokens, model_.options().vocab, "GPTDecoder::feed", "tokens to feed");
  NoGradGuard no_grad;
  const int64_t block = model_.options().block_size;
  const int64_t previous_start = start_;
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  const int64_t end = static_cast<int64_t>(tokens_.size());
  const int64_t excess = end - start_ - block;
  if (excess > 0) {
    const int64_t shift = options_.window_shift;
    start_ += (excess + shift - 1) / shift * shift;  // as many shifts as needed to fit
  }
  // With the cache and an unmoved window only the new tokens go through the model; otherwise
  // the whole window (and, with the cache, its keys and values are rebuilt from scratch).
  int64_t from = start_;
  if (cache_) {
    if (start_ != previous_start) {
      cache_->reset();
    } else {
      from = end - static_cast<int64_t>(tokens.size());
    }
  }
  const int64_t n = end - from;
  const Indices ids(Shape{1, n}, std::vector<int64_t>(tokens_.begin() + from, tokens_.end()));
  const Variable logits = cache_ ? model_.forward(ids, *cache_) : model_.forward(ids);  // (1, n, V)
  positions_computed_ += n;
  return logits.value().select(0, 0).select(0, n - 1).to_vector();
}

// ---- generate ----

std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, const GenerateOptions& o) {
  check_generate_options(o, prompt, model.options().vocab, model.options().block_size, "block_size");
  if (o.max_new_tokens == 0) return {};
  EvalModeGuard eval(model);
  GPTDecoder decoder(model, DecodeOptions{o.use_cache, o.window_shift});
  return generate_with(decoder, prompt, o);
}

std::vector<int64_t> GPT::generate(const std::vector<int64_t>& prompt, const GenerateOptions& options) {
  return ag::generate(*this, prompt, options);
}

}  // namespace ag
