#include "attograd/models/seq2seq/seq2seq_decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/ops.h"

namespace ag {

namespace {

// Rows `rows` of t along dimension 0, a new tensor.
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  Shape shape = t.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = zeros(shape, t.dtype());
  for (size_t i = 0; i < rows.size(); ++i) out.select(0, static_cast<int64_t>(i)).copy_(t.select(0, rows[i]));
  return out;
}

// The cache with its batch rows gathered: every layer's positions re-appended in the new order.
void reorder_cache(KvCache& cache, const std::vector<int64_t>& rows) {
  const int64_t n = cache.length();
  if (n == 0) return;
  std::vector<Tensor> keys, values;
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    keys.push_back(gather_rows(cache.keys(l), rows));
    values.push_back(gather_rows(cache.values(l), rows));
  }
  cache.reset();
  for (int64_t l = 0; l < cache.n_layers(); ++l) cache.append(l, keys[static_cast<size_t>(l)], values[static_cast<size_t>(l)]);
}

// log-softmax of one row, in double.
std::vector<double> log_probs(const Tensor& logits_row) {
  std::vector<double> v = logits_row.to_vector();
  const double top = *std::max_element(v.begin(), v.end());
  double sum = 0.0;
  for (double x : v) sum += std::exp(x - top);
  const double lse = top + std::log(sum);
  for (double& x : v) x -= lse;
  return v;
}

// Checks the options and the source; returns max_tokens resolved.
int64_t checked(Seq2Seq& model, const Indices& src, const std::vector<int64_t>& src_lengths,
                const Seq2SeqDecodeOptions& o, const char* op) {
  const Seq2SeqOptions& m = model.options();
  const auto fail = [op](const std::string& what) { throw std::invalid_argument(std::string(op) + ": " + what); };
  if (o.bos < 0 || o.bos >= m.tgt_vocab || o.eos < 0 || o.eos >= m.tgt_vocab) {
    fail("bos=" + std::to_string(o.bos) + " and eos=" + std::to_string(o.eos) + " must lie in [0, tgt_vocab=" +
         std::to_string(m.tgt_vocab) + ")");
  }
  if (o.max_tokens < 0 || o.max_tokens > m.max_len) {
    fail("max_tokens " + std::to_string(o.max_tokens) + " must lie in [0, max_len=" + std::to_string(m.max_len) +
         "] (0 means max_len)");
  }
  if (o.beam < 1) fail("the beam width must be at least 1, got " + std::to_string(o.beam));
  if (!(o.length_penalty >= 0.0 && std::isfinite(o.length_penalty))) {
    std::ostringstream os;
    os << "length_penalty (alpha) must be finite and >= 0, got " << o.length_penalty;
    fail(os.str());
  }
  model.check_tokens(op, "src", src, m.src_vocab);
  model.check_lengths(op, "src_lengths", src_lengths, src.shape[0], src.shape[1]);
  return o.max_tokens == 0 ? m.max_len : o.max_tokens;
}

Hypothesis finish(std::vector<int64_t> tokens, double log_prob, bool ended, double alpha) {
  const int64_t n = static_cast<int64_t>(tokens.size()) + (ended ? 1 : 0);
  return {std::move(tokens), log_prob, log_prob / length_penalty(n, alpha), ended};
}

// Keeps the `keep` best finished hypotheses by score; among equal scores the earlier stays.
void add_finished(std::vector<Hypothesis>& finished, Hypothesis h, int64_t keep) {
  finished.push_back(std::move(h));
  if (static_cast<int64_t>(finished.size()) <= keep) return;
  // The last of the worst goes: the earliest of equals survive.
  size_t worst = 0;
  for (size_t i = 1; i < finished.size(); ++i) {
    if (finished[i].score <= finished[worst].score) worst = i;
  }
  finished.erase(finished.begin() + static_cast<std::ptrdiff_t>(worst));
}

}  // namespace

double length_penalty(int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

Seq2SeqDecoder::Seq2SeqDecoder(Seq2Seq& model, const Tensor& memory, std::vector<int64_t> src_lengths, bool use_cache)
    : model_(model), memory_(memory), src_lengths_(std::move(src_lengths)), use_cache_(use_cache) {
  NoGradGuard no_grad;
  const Seq2SeqOptions& o = model.options();
  if (memory.dim() != 3 || memory.shape()[2] != o.d_model || memory.dtype() != model.dtype()) {
    throw std::invalid_argument("Seq2SeqDecoder: memory " + memory.shape().str() + " (" + dtype_name(memory.dtype()) +
                                ") must be (B, S, d_model=" + std::to_string(o.d_model) + ") in the model's " +
                                dtype_name(model.dtype()));
  }
  model.check_lengths("Seq2SeqDecoder", "src_lengths", src_lengths_, memory.shape()[0], memory.shape()[1]);
  history_.assign(src_lengths_.size(), {});
  // The memory's keys and values enter their cache with the first step.
  if (use_cache_) cache_.emplace(model.make_cache(memory.shape()[0], memory.shape()[1]));
}

Tensor Seq2SeqDecoder::step(const std::vector<int64_t>& tokens) {
  NoGradGuard no_grad;
  const int64_t B = batch();
  if (static_cast<int64_t>(tokens.size()) != B || length_ >= model_.options().max_len) {
    throw std::invalid_argument("Seq2SeqDecoder::step: " + std::to_string(tokens.size()) + " tokens for " +
                                std::to_string(B) + " rows at position " + std::to_string(length_) +
                                " (max_len=" + std::to_string(model_.options().max_len) + ")");
  }
  for (int64_t b = 0; b < B; ++b) history_[static_cast<size_t>(b)].push_back(tokens[static_cast<size_t>(b)]);
  ++length_;
  if (!use_cache_) {
    std::vector<int64_t> all;
    for (const auto& row : history_) all.insert(all.end(), row.begin(), row.end());
    const Tensor logits = model_.decode(Indices(Shape{B, length_}, all), memory_, src_lengths_).value();
    return logits.select(1, length_ - 1);  // (B, V)
  }
  // The new position only, through the same decode: the cache holds the ones before it.
  return model_.decode(Indices(Shape{B, 1}, tokens), memory_, src_lengths_, {}, &*cache_).value().select(1, 0);
}

void Seq2SeqDecoder::reorder(const std::vector<int64_t>& rows) {
  const int64_t B = batch();
  bool ok = static_cast<int64_t>(rows.size()) == B;
  for (int64_t r : rows) ok = ok && r >= 0 && r < B;
  if (!ok) {
    throw std::invalid_argument("Seq2SeqDecoder::reorder: needs " + std::to_string(B) + " rows, each in [0, " +
                                std::to_string(B) + "), got " + std::to_string(rows.size()));
  }
  std::vector<std::vector<int64_t>> history;
  std::vector<int64_t> lengths;
  for (int64_t r : rows) {
    history.push_back(history_[static_cast<size_t>(r)]);
    lengths.push_back(src_lengths_[static_cast<size_t>(r)]);
  }
  history_ = std::move(history);
  src_lengths_ = std::move(lengths);
  memory_ = Variable(gather_rows(memory_.value(), rows));
  if (cache_) {
    reorder_cache(cache_->self, rows);
    reorder_cache(cache_->memory, rows);
  }
}

std::vector<Hypothesis> greedy_decode(Seq2Seq& model, const Indices& src, const std::vector<int64_t>& src_lengths,
                                      const Seq2SeqDecodeOptions& options) {
  const int64_t max_tokens = checked(model, src, src_lengths, options, "greedy_decode");
  NoGradGuard no_grad;
  EvalModeGuard eval(model);
  const int64_t B = src.shape[0];
  Seq2SeqDecoder decoder(model, model.encode(src, src_lengths).value(), src_lengths, options.use_cache);
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(B));
  std::vector<double> log_prob(static_cast<size_t>(B), 0.0);
  std::vector<bool> ended(static_cast<size_t>(B), false);
  std::vector<int64_t> next(static_cast<size_t>(B), options.bos);
  for (int64_t t = 0; t < max_tokens; ++t) {
    const Tensor logits = decoder.step(next);
    bool all_ended = true;
    for (int64_t b = 0; b < B; ++b) {
      const size_t i = static_cast<size_t>(b);
      if (ended[i]) continue;  // keeps feeding its last token; the result is ignored
      // The most likely token, the first on a tie, ranked by the summed log-probability as beam
      // search ranks it (adding the same sum changes no order, but may round two values equal).
      const std::vector<double> lp = log_probs(logits.select(0, b));
      int64_t best = 0;
      for (size_t v = 1; v < lp.size(); ++v) {
        if (log_prob[i] + lp[v] > log_prob[i] + lp[static_cast<size_t>(best)]) best = static_cast<int64_t>(v);
      }
      log_prob[i] += lp[static_cast<size_t>(best)];
      next[i] = best;
      if (best == options.eos) ended[i] = true;
      else tokens[i].push_back(best);
      all_ended = all_ended && ended[i];
    }
    if (all_ended) break;
  }
  std::vector<Hypothesis> out;
  for (size_t i = 0; i < tokens.size(); ++i) out.push_back(finish(tokens[i], log_prob[i], ended[i], options.length_penalty));
  return out;
}

namespace {

Hypothesis beam_search_one(Seq2Seq& model, const Tensor& memory, int64_t src_length, const Seq2SeqDecodeOptions& o,
                           int64_t max_tokens) {
  const int64_t K = o.beam;
  const int64_t V = model.options().tgt_vocab;
  // The encoder ran once; every beam reads the same memory.
  Seq2SeqDecoder decoder(model, gather_rows(memory, std::vector<int64_t>(static_cast<size_t>(K), 0)),
                         std::vector<int64_t>(static_cast<size_t>(K), src_length), o.use_cache);
  struct Beam {
    std::vector<int64_t> tokens;
    double log_prob = 0.0;
  };
  // Only beam 0 is alive at the start: the others would repeat it.
  constexpr double kDead = -std::numeric_limits<double>::infinity();
  std::vector<Beam> beams(static_cast<size_t>(K));
  for (size_t k = 1; k < beams.size(); ++k) beams[k].log_prob = kDead;
  std::vector<int64_t> next(static_cast<size_t>(K), o.bos);
  std::vector<Hypothesis> finished;

  for (int64_t t = 0; t < max_tokens; ++t) {
    const Tensor logits = decoder.step(next);
    struct Candidate {
      double log_prob;
      int64_t beam, token;
    };
    std::vector<Candidate> candidates;
    for (int64_t k = 0; k < K; ++k) {
      if (beams[static_cast<size_t>(k)].log_prob == kDead) continue;
      const std::vector<double> lp = log_probs(logits.select(0, k));
      for (int64_t v = 0; v < V; ++v) candidates.push_back({beams[static_cast<size_t>(k)].log_prob + lp[static_cast<size_t>(v)], k, v});
    }
    // Best first; ties go to the lower (beam, token), so beam 1 picks greedy's token.
    const size_t keep = std::min(candidates.size(), static_cast<size_t>(2 * K));
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep), candidates.end(),
                      [](const Candidate& a, const Candidate& b) {
                        if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
                        return a.beam != b.beam ? a.beam < b.beam : a.token < b.token;
                      });
    std::vector<Beam> alive;
    std::vector<int64_t> rows;
    for (size_t c = 0; c < keep && static_cast<int64_t>(alive.size()) < K; ++c) {
      const Candidate& cand = candidates[c];
      const Beam& from = beams[static_cast<size_t>(cand.beam)];
      if (cand.token == o.eos) {
        add_finished(finished, finish(from.tokens, cand.log_prob, true, o.length_penalty), K);
        continue;
      }
      Beam b{from.tokens, cand.log_prob};
      b.tokens.push_back(cand.token);
      alive.push_back(std::move(b));
      rows.push_back(cand.beam);
    }
    if (alive.empty()) break;
    // Done once `beam` hypotheses have finished and no alive one, ending at its present length,
    // would score above the worst of them. Stopping at the first `beam` finished ones instead
    // lets unlikely hypotheses that happen to end early fill the set while the likely one is
    // still growing (a sort-var model decoded worse with beam 4 than greedily that way).
    if (static_cast<int64_t>(finished.size()) >= K) {
      double worst = finished.front().score, best_alive = kDead;
      for (const Hypothesis& h : finished) worst = std::min(worst, h.score);
      for (const Beam& b : alive) {
        const int64_t n = static_cast<int64_t>(b.tokens.size());
        best_alive = std::max(best_alive, b.log_prob / length_penalty(n, o.length_penalty));
      }
      if (worst >= best_alive) break;
    }
    // Rows past the alive ones repeat row 0, dead (their log-probabilities never win).
    while (static_cast<int64_t>(alive.size()) < K) {
      alive.push_back({alive.front().tokens, kDead});
      rows.push_back(rows.front());
    }
    decoder.reorder(rows);
    beams = std::move(alive);
    for (size_t k = 0; k < beams.size(); ++k) next[k] = beams[k].tokens.back();
    if (t + 1 == max_tokens) {
      for (const Beam& b : beams) {
        if (b.log_prob != kDead) add_finished(finished, finish(b.tokens, b.log_prob, false, o.length_penalty), K);
      }
    }
  }
  if (finished.empty()) throw std::logic_error("beam_search: no hypothesis finished (max_tokens >= 1 should ensure one)");
  // The first of the best: ties keep the order in which hypotheses finished.
  const auto best = std::max_element(finished.begin(), finished.end(),
                                     [](const Hypothesis& a, const Hypothesis& b) { return a.score < b.score; });
  return *best;
}

}  // namespace

std::vector<Hypothesis> beam_search(Seq2Seq& model, const Indices& src, const std::vector<int64_t>& src_lengths,
                                    const Seq2SeqDecodeOptions& options) {
  const int64_t max_tokens = checked(model, src, src_lengths, options, "beam_search");
  NoGradGuard no_grad;
  EvalModeGuard eval(model);
  const int64_t S = src.shape[1];
  std::vector<Hypothesis> out;
  for (int64_t b = 0; b < src.shape[0]; ++b) {
    const std::vector<int64_t> row(src.data.begin() + b * S, src.data.begin() + (b + 1) * S);
    const int64_t length = src_lengths[static_cast<size_t>(b)];
    const Tensor memory = model.encode(Indices(Shape{1, S}, row), {length}).value();
    out.push_back(beam_search_one(model, memory, length, options, max_tokens));
  }
  return out;
}

}  // namespace ag
