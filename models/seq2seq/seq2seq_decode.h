// Decoding with a Seq2Seq: greedy and beam search, the encoder run once per source, the
// decoder's self-attention keys and values cached between steps, the cross-attention's
// computed once.
//
//   Seq2SeqDecodeOptions o{.bos = 1, .eos = 2, .beam = 4};
//   std::vector<Hypothesis> greedy = greedy_decode(model, src, src_lengths, o);   // one per source
//   std::vector<Hypothesis> best = beam_search(model, src, src_lengths, o);
//   best[b].tokens   // the output without bos and eos
//
// The decoder's input starts with `bos`; each step appends the chosen token, until `eos` or
// max_tokens tokens. Greedy takes the most likely token (the lowest id on a tie), for a whole
// batch at once. Beam search keeps `beam` hypotheses per source, ranked by their summed
// log-probabilities; each step looks at the best 2 * beam extensions in order, moves those
// that end with eos into the finished set (which keeps the best `beam` by score) and keeps the
// first `beam` others alive. It stops when `beam` hypotheses have finished and no alive one,
// were it to end at its present length, would score above the worst finished one (or at
// max_tokens, where the alive ones count as finished). A hypothesis's score is its
// log-probability divided by the length penalty of GNMT (Wu et al. 2016),
// lp = ((5 + n) / 6)^alpha with n its tokens counting eos; the best score wins:
// alpha = 0 ranks by log-probability alone, larger alphas favour longer outputs. With beam 1
// this is greedy decoding, token for token (a test holds them equal).
//
// Seq2SeqDecoder is the step underneath: rows of target tokens in, next-token logits out,
// through Seq2Seq::decode with a Seq2SeqCache (use_cache: only the new position runs) or over
// every token so far (for tests: the two agree in f64 to 1e-10 at every step). reorder()
// gathers rows when beam search keeps some hypotheses twice and drops others.
//
// Decoding builds no graph (NoGradGuard) and runs the model in eval mode, restoring its mode
// afterwards. Bad options or input (a beam width of 0, bos or eos outside the vocabulary,
// max_tokens past the positional table, source tokens or lengths out of range) throw
// std::invalid_argument naming the function and the value before the model runs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/core/tensor.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/models/seq2seq/seq2seq.h"

namespace ag {

struct Seq2SeqDecodeOptions {
  int64_t bos = 1;         // the decoder's first input token
  int64_t eos = 2;         // ends a hypothesis
  int64_t max_tokens = 0;  // most tokens produced per source, eos included; 0 means the model's max_len
  int64_t beam = 4;        // beam_search's width, >= 1
  double length_penalty = 0.6;  // GNMT's alpha, >= 0
  bool use_cache = true;
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // without bos and eos
  double log_prob = 0.0;        // summed over the tokens and eos when it ended
  double score = 0.0;           // log_prob / ((5 + n) / 6)^alpha, n = tokens counting eos
  bool ended = false;           // produced eos (false: stopped at max_tokens)
};

// GNMT's length penalty ((5 + length) / 6)^alpha.
double length_penalty(int64_t length, double alpha);

class Seq2SeqDecoder {
 public:
  // memory: the encoder's output (B, S, d_model) for sources of src_lengths.
  Seq2SeqDecoder(Seq2Seq& model, const Tensor& memory, std::vector<int64_t> src_lengths, bool use_cache = true);

  // One new token per row, at position length() -> logits (B, tgt_vocab) predicting the next.
  Tensor step(const std::vector<int64_t>& tokens);
  // Row i becomes the former row rows[i] (rows.size() == batch(), entries in [0, batch())).
  void reorder(const std::vector<int64_t>& rows);

  int64_t length() const { return length_; }
  int64_t batch() const { return static_cast<int64_t>(src_lengths_.size()); }

 private:
  Seq2Seq& model_;
  Variable memory_;  // (B, S, d_model), outside any graph
  std::vector<int64_t> src_lengths_;
  bool use_cache_;
  // use_cache: self grows by one position per step; memory, the cross-attention's keys and
  // values, is filled by the first step.
  std::optional<Seq2SeqCache> cache_;
  std::vector<std::vector<int64_t>> history_;  // every row's tokens so far (the uncached path)
  int64_t length_ = 0;
};

std::vector<Hypothesis> greedy_decode(Seq2Seq& model, const Indices& src, const std::vector<int64_t>& src_lengths,
                                      const Seq2SeqDecodeOptions& options);
// The best hypothesis per source; sources are searched one after another.
std::vector<Hypothesis> beam_search(Seq2Seq& model, const Indices& src, const std::vector<int64_t>& src_lengths,
                                    const Seq2SeqDecodeOptions& options);

}  // namespace ag
