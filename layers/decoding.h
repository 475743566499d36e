// Decoding a language model one token at a time, whatever the family: sampling a token from
// logits, the options of a generation, and the loop that feeds each drawn token back. A family
// provides a TokenDecoder (its model with its context window and KV cache: GPTDecoder in
// models/gpt/generate.h, LlamaDecoder in models/llama/llama_generate.h); generate_with() draws
// the continuation from it.
//
// Sampling (sample_token): the logits of the last position are divided by the temperature,
// cut to the top_k most likely tokens, then to the nucleus (the fewest most likely tokens whose
// probability reaches top_p), renormalised, and one token is drawn. Temperature 0 is greedy
// (the most likely token, the lowest id on a tie) and ignores top_k, top_p and the seed. The
// draw is counter-based (core/rng.h): token n of a generation uses uniform_f64(key(seed), n),
// so the same seed, model and prompt give the same tokens whatever else ran before, and the
// cached and uncached paths (which compute the same logits) make the same choices.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace ag {

struct SamplingOptions {
  double temperature = 1.0;  // >= 0; 0 is greedy
  int64_t top_k = 0;         // >= 0; 0 keeps every token
  double top_p = 1.0;        // in (0, 1]; 1 keeps every token
  uint64_t seed = 0;
};

// std::invalid_argument naming the bad option and its value.
void validate(const SamplingOptions& options);

// The distribution sample_token draws from, over all V tokens (zeros outside the kept set; a
// one-hot argmax for temperature 0). logits: one row of V values, finite or -inf (a token
// excluded beforehand), at least one finite; NaN and +inf are refused.
std::vector<double> sampling_distribution(const std::vector<double>& logits, const SamplingOptions& options);
// One token drawn from sampling_distribution with uniform_f64(key(seed), draw), by the inverse
// cumulative distribution in token order.
int64_t sample_token(const std::vector<double>& logits, const SamplingOptions& options, uint64_t draw);

struct DecodeOptions {
  bool use_cache = true;
  int64_t window_shift = 1;  // in [1, context]: how far the window moves when the sequence outgrows it
};

struct GenerateOptions {
  int64_t max_new_tokens = 0;  // stop after this many new tokens (>= 0)
  SamplingOptions sampling;
  bool use_cache = true;
  int64_t window_shift = 1;
  // A prompt longer than the context: true keeps its last context tokens as the first window
  // (nanoGPT's crop); false refuses it with std::invalid_argument.
  bool crop_prompt = true;
  // > 0: only ids below it are drawn. A model's table may be longer than its tokenizer's
  // vocabulary (Hugging Face pads it); the ids past the tokenizer decode to nothing.
  int64_t vocab_limit = 0;
  // Streaming: called with each new token as soon as it is drawn; returning false stops
  // generation after that token.
  std::function<bool(int64_t token)> on_token;
};

// One sequence being decoded by a model: feed() appends tokens (at least one, each in
// [0, vocab)) and returns the logits (vocab values) that predict the next one.
class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;
  virtual std::vector<double> feed(const std::vector<int64_t>& tokens) = 0;
};

// The loop of a generation: feeds the prompt, then draws max_new_tokens tokens with
// sample_token (draw n for the n-th), handing each to on_token and feeding it back (but the
// last). The caller has checked the prompt and the options against its model.
std::vector<int64_t> generate_with(TokenDecoder& decoder, const std::vector<int64_t>& prompt,
                                   const GenerateOptions& options);

// The checks the families' decoders and generate() share (std::invalid_argument naming `op`):
// tokens non-empty and in [0, vocab); a window shift in [1, context]; a generation's options.
void check_token_ids(const std::vector<int64_t>& tokens, int64_t vocab, const char* op, const char* what);
// `context_name` is what the family calls its context in messages ("block_size", "max_positions").
void check_window_shift(int64_t shift, int64_t context, const char* op, const char* context_name = "context");
void check_generate_options(const GenerateOptions& options, const std::vector<int64_t>& prompt, int64_t vocab,
                            int64_t context, const char* context_name = "context");

}  // namespace ag
