#include "attograd/layers/decoding.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "attograd/core/format.h"
#include "attograd/core/rng.h"

namespace ag {

namespace {

void check_logits(const std::vector<double>& logits, const char* op) {
  if (logits.empty()) throw std::invalid_argument(std::string(op) + ": no logits (an empty vocabulary)");
  bool any_finite = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double v = logits[i];
    if (std::isnan(v) || v == INFINITY) {
      throw std::invalid_argument(std::string(op) + ": logit " + format_number(v) + " of token " + std::to_string(i) +
                                  " (of " + std::to_string(logits.size()) + "); only finite values or -inf are allowed");
    }
    any_finite |= std::isfinite(v);
  }
  if (!any_finite) {
    throw std::invalid_argument(std::string(op) + ": all " + std::to_string(logits.size()) +
                                " logits are -inf: no token can be chosen");
  }
}

}  // namespace

void check_token_ids(const std::vector<int64_t>& tokens, int64_t vocab, const char* op, const char* what) {
  if (tokens.empty()) throw std::invalid_argument(std::string(op) + ": the " + what + " is empty; give at least one token");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      throw std::invalid_argument(std::string(op) + ": token id " + std::to_string(tokens[i]) + " at position " +
                                  std::to_string(i) + " of the " + what + " (" + std::to_string(tokens.size()) +
                                  " tokens) is outside [0, vocab=" + std::to_string(vocab) + ")");
    }
  }
}

void check_window_shift(int64_t shift, int64_t context, const char* op, const char* context_name) {
  if (shift < 1 || shift > context) {
    throw std::invalid_argument(std::string(op) + ": window_shift must lie in [1, " + context_name + "=" +
                                std::to_string(context) + "], got " + std::to_string(shift));
  }
}

void check_generate_options(const GenerateOptions& o, const std::vector<int64_t>& prompt, int64_t vocab,
                            int64_t context, const char* context_name) {
  validate(o.sampling);
  if (o.max_new_tokens < 0) {
    throw std::invalid_argument("generate: max_new_tokens must be >= 0, got " + std::to_string(o.max_new_tokens));
  }
  check_token_ids(prompt, vocab, "generate", "prompt");
  if (!o.crop_prompt && static_cast<int64_t>(prompt.size()) > context) {
    throw std::invalid_argument("generate: the prompt has " + std::to_string(prompt.size()) +
                                " tokens, more than the context " + context_name + "=" + std::to_string(context) +
                                ", and crop_prompt is off (on, only its last " + std::to_string(context) +
                                " tokens would be used)");
  }
  check_window_shift(o.window_shift, context, "generate", context_name);
  if (o.vocab_limit < 0 || o.vocab_limit > vocab) {
    throw std::invalid_argument("generate: vocab_limit " + std::to_string(o.vocab_limit) + " must lie in [0, vocab=" +
                                std::to_string(vocab) + "] (0: every id)");
  }
}

void validate(const SamplingOptions& o) {
  if (!(o.temperature >= 0.0) || !std::isfinite(o.temperature)) {
    throw std::invalid_argument("sampling: temperature must be finite and >= 0 (0 is greedy), got " +
                                format_number(o.temperature));
  }
  if (o.top_k < 0) {
    throw std::invalid_argument("sampling: top_k must be >= 0 (0 keeps every token), got " + std::to_string(o.top_k));
  }
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) {
    throw std::invalid_argument("sampling: top_p must lie in (0, 1] (1 keeps every token), got " + format_number(o.top_p));
  }
}

std::vector<double> sampling_distribution(const std::vector<double>& logits, const SamplingOptions& o) {
  validate(o);
  check_logits(logits, "sampling_distribution");
  const size_t V = logits.size();
  std::vector<double> probs(V, 0.0);
  const size_t best = static_cast<size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  if (o.temperature == 0.0) {
    probs[best] = 1.0;  // greedy; max_element returns the first maximum: the lowest id on a tie
    return probs;
  }
  // Most likely first; equal logits keep id order, so the cut below is deterministic.
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  size_t kept = o.top_k > 0 ? std::min(V, static_cast<size_t>(o.top_k)) : V;
  // Differences before the division: (l - max) / T is <= 0 and cannot overflow for a tiny T.
  const double top = logits[best];
  double total = 0.0;
  for (size_t r = 0; r < kept; ++r) {
    const double p = std::exp((logits[order[r]] - top) / o.temperature);
    probs[order[r]] = p;
    total += p;
  }
  if (o.top_p < 1.0) {
    // The nucleus: the fewest leading tokens whose probability reaches top_p (at least one).
    double cumulative = 0.0;
    size_t nucleus = 0;
    while (nucleus < kept) {
      cumulative += probs[order[nucleus]] / total;
      ++nucleus;
      if (cumulative >= o.top_p) break;
    }
    for (size_t r = nucleus; r < kept; ++r) probs[order[r]] = 0.0;
    kept = nucleus;
    total = 0.0;
    for (size_t r = 0; r < kept; ++r) total += probs[order[r]];
  }
  for (double& p : probs) p /= total;
  return probs;
}

int64_t sample_token(const std::vector<double>& logits, const SamplingOptions& o, uint64_t draw) {
  const std::vector<double> probs = sampling_distribution(logits, o);
  if (o.temperature == 0.0) {
    return static_cast<int64_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
  }
  Generator gen(o.seed);
  const double u = Generator::uniform_f64(gen.next_stream(), draw);  // [0, 1)
  double cumulative = 0.0;
  int64_t last_kept = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0.0) continue;
    cumulative += probs[i];
    last_kept = static_cast<int64_t>(i);
    if (u < cumulative) return last_kept;
  }
  return last_kept;  // u within rounding of 1: the last kept token
}

std::vector<int64_t> generate_with(TokenDecoder& decoder, const std::vector<int64_t>& prompt, const GenerateOptions& o) {
  std::vector<int64_t> out;
  if (o.max_new_tokens == 0) return out;
  // Ids at and past the limit are never drawn: -inf before sampling.
  const auto limited = [&](std::vector<double> logits) {
    if (o.vocab_limit > 0) std::fill(logits.begin() + std::min<ptrdiff_t>(o.vocab_limit, std::ssize(logits)), logits.end(), -INFINITY);
    return logits;
  };
  std::vector<double> logits = limited(decoder.feed(prompt));
  for (int64_t n = 0; n < o.max_new_tokens; ++n) {
    const int64_t token = sample_token(logits, o.sampling, static_cast<uint64_t>(n));
    out.push_back(token);
    const bool more = !o.on_token || o.on_token(token);
    if (!more || n + 1 == o.max_new_tokens) break;  // no forward for a token nobody will draw
    logits = limited(decoder.feed({token}));
  }
  return out;
}

}  // namespace ag
