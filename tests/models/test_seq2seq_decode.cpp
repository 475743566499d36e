// Seq2Seq decoding (models/seq2seq/seq2seq_decode.h): the cached decoder against the decoder run over
// every token so far (f64, every step, also after beams are reordered), TransformerDecoderLayer
// and Seq2Seq::decode with caches against the same forwards without, beam width 1 against
// greedy, beam search's scores against the model's own log-probabilities, and bad options.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "models_support.h"

namespace ag::testing {

namespace {

constexpr int64_t kBos = 1, kEos = 2;

Seq2SeqOptions decode_model(bool norm_first) {
  return {.src_vocab = 9, .tgt_vocab = 7, .max_len = 8, .d_model = 16, .n_head = 4, .d_ff = 24,
          .n_encoder_layers = 2, .n_decoder_layers = 2, .dropout = 0.1, .norm_first = norm_first};
}

// The seed's switches on the same sizes: input norms, no final norms, no attention bias, logits
// scaled, and heads whose keys (d_k 3) and values (d_v 5) differ in size, as the caches hold them.
Seq2SeqOptions seed_decode_model() {
  Seq2SeqOptions o = decode_model(false);
  o.input_norm = true, o.final_norm = false, o.layer_norm_eps = 1e-6, o.attn_bias = false;
  o.d_k = 3, o.d_v = 5, o.scale_logits = true;
  return o;
}

const Indices kSrc(Shape{3, 6}, {3, 4, 5, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 0, 0, 0, 0, 0});
const std::vector<int64_t> kSrcLengths = {3, 6, 1};

// log P(tokens, eos | src) from one teacher-forced forward pass.
double sequence_log_prob(Seq2Seq& model, const Indices& src_row, int64_t src_length, const Hypothesis& h) {
  std::vector<int64_t> in = {kBos};
  in.insert(in.end(), h.tokens.begin(), h.tokens.end());
  std::vector<int64_t> out = h.tokens;
  if (h.ended) out.push_back(kEos);
  else in.pop_back();  // stopped at max_tokens: the last token was never fed
  const int64_t T = static_cast<int64_t>(in.size());
  NoGradGuard no_grad;
  const Tensor logp = log_softmax(model(src_row, {src_length}, Indices(Shape{1, T}, in), {T}), -1).value();
  double sum = 0.0;
  for (int64_t t = 0; t < T; ++t) sum += logp.at({0, t, out[static_cast<size_t>(t)]});
  return sum;
}

Indices row_of(const Indices& src, int64_t b) {
  const int64_t S = src.shape[1];
  return Indices(Shape{1, S}, std::vector<int64_t>(src.data.begin() + b * S, src.data.begin() + (b + 1) * S));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(seq2seq_decode)

// One decoder layer, four positions fed two then one then one through its forward with both
// caches: every new row equals the layer's forward over all positions so far without them.
BOOST_AUTO_TEST_CASE(the_decoder_layer_with_caches_equals_its_full_forward) {
  for (const bool norm_first : {false, true}) {
    manual_seed(100);
    TransformerDecoderLayer layer({.block = {.d_model = 8, .n_head = 2, .d_ff = 12, .dropout = 0.2,
                                             .norm_first = norm_first, .d_k = 3, .d_v = 5},
                                   .d_memory = 6});
    layer.to(DType::f64);
    layer.eval();
    const Tensor x = randn({2, 4, 8}, 101), memory = randn({2, 5, 6}, 102);
    const AttentionMask memory_mask = AttentionMask::key_padding({2, 5}, 5);
    NoGradGuard no_grad;
    const KvCacheOptions c{.n_layers = 1, .batch = 2, .n_head = 2, .d_k = 3, .d_v = 5, .max_len = 4, .dtype = DType::f64};
    KvCache self_kv(c);
    KvCache memory_kv(KvCacheOptions{.n_layers = 1, .batch = 2, .n_head = 2, .d_k = 3, .d_v = 5, .max_len = 5,
                                     .dtype = DType::f64});
    int64_t done = 0;
    for (const int64_t n : {2, 1, 1}) {
      const Tensor full = layer(Variable(x.narrow(1, 0, done + n)), Variable(memory), AttentionMask::causal(done + n),
                                memory_mask)
                              .value();
      const Tensor step = layer(Variable(x.narrow(1, done, n)), Variable(memory), self_kv.causal_mask(0, n),
                                memory_mask, self_kv.layer(0), memory_kv.memory_layer(0))
                              .value();
      BOOST_TEST(max_abs_diff(step, full.narrow(1, done, n)) < 1e-10);
      if (done > 0) {  // the cache is what makes this right: the new rows alone see only themselves
        const Tensor alone =
            layer(Variable(x.narrow(1, done, n)), Variable(memory), AttentionMask::causal(n), memory_mask).value();
        BOOST_TEST(max_abs_diff(alone, full.narrow(1, done, n)) > 1e-3);
      }
      done += n;
    }
    BOOST_TEST(self_kv.length() == 4);
    BOOST_TEST(memory_kv.length() == 5);  // stored by the first call, never again
    // Each cache in its own role.
    AG_CHECK_THROWS_WITH(layer(Variable(x.narrow(1, 0, 1)), Variable(memory), {}, memory_mask,
                               memory_kv.memory_layer(0), memory_kv.memory_layer(0)),
                         std::invalid_argument, "TransformerDecoderLayer", "self_cache", "cache.layer(i)");
    AG_CHECK_THROWS_WITH(layer(Variable(x.narrow(1, 0, 1)), Variable(memory), {}, memory_mask, {}, self_kv.layer(0)),
                         std::invalid_argument, "memory_cache", "cache.memory_layer(i)");
    // A target mask that does not cover the cached positions names the layer and the mask.
    self_kv.reset();
    layer(Variable(x.narrow(1, 0, 1)), Variable(memory), {}, memory_mask, self_kv.layer(0));
    AG_CHECK_THROWS_WITH(layer(Variable(x.narrow(1, 1, 2)), Variable(memory), AttentionMask::causal(2), memory_mask,
                               self_kv.layer(0)),
                         std::invalid_argument, "tgt_mask (self-attention)", "(2, 2, 2, 3)");
  }
}

// Seq2Seq::decode with a cache, target chunks of 1, 2 and 2 positions: the logits equal the
// rows of decode over every position so far, through the same decoder forward. Post-norm,
// pre-norm and the seed's switches (keys and values of different sizes in the caches).
BOOST_AUTO_TEST_CASE(decode_with_a_cache_equals_decode_over_every_position) {
  for (const Seq2SeqOptions& options : {decode_model(false), decode_model(true), seed_decode_model()}) {
    BOOST_TEST_CONTEXT("norm_first=" << options.norm_first << " d_k=" << options.d_k) {
      manual_seed(107);
      Seq2Seq model(options);
      model.to(DType::f64);
      model.eval();
      NoGradGuard no_grad;
      const Variable memory = model.encode(kSrc, kSrcLengths);
      const Indices tgt(Shape{3, 5}, {1, 3, 4, 5, 6, 1, 6, 0, 2, 2, 1, 5, 5, 3, 4});
      Seq2SeqCache cache = model.make_cache(3, 6);
      int64_t done = 0;
      for (const int64_t n : {1, 2, 2}) {
        std::vector<int64_t> upto, chunk;
        for (int64_t b = 0; b < 3; ++b) {
          for (int64_t t = 0; t < done + n; ++t) {
            upto.push_back(tgt[b * 5 + t]);
            if (t >= done) chunk.push_back(tgt[b * 5 + t]);
          }
        }
        const Tensor full = model.decode(Indices(Shape{3, done + n}, upto), memory, kSrcLengths).value();
        const Tensor step = model.decode(Indices(Shape{3, n}, chunk), memory, kSrcLengths, {}, &cache).value();
        BOOST_TEST(step.shape() == (Shape{3, n, 7}));
        BOOST_TEST(max_abs_diff(step, full.narrow(1, done, n)) < 1e-10, "after " << done);
        done += n;
      }
      BOOST_TEST(cache.self.length() == 5);
      BOOST_TEST(cache.memory.length() == 6);
      AG_CHECK_THROWS_WITH(model.decode(Indices(Shape{3, 1}, {1, 1, 1}), memory, kSrcLengths, {1, 1, 1}, &cache),
                           std::invalid_argument, "Seq2Seq::decode", "tgt_lengths", "empty");
      Seq2SeqCache narrow = model.make_cache(2, 6);
      AG_CHECK_THROWS_WITH(model.decode(Indices(Shape{3, 1}, {1, 1, 1}), memory, kSrcLengths, {}, &narrow),
                           std::invalid_argument, "MultiHeadAttention", "B=2");
    }
  }
}

// The same tokens through the cached and the uncached decoder: equal logits at every step, also
// after a reorder that duplicates one row and drops another; and equal to the teacher-forced
// forward over the whole sequence.
BOOST_AUTO_TEST_CASE(the_cached_decoder_equals_recomputing_at_every_step) {
  for (const bool norm_first : {false, true}) {
    BOOST_TEST_CONTEXT("norm_first=" << norm_first) {
      manual_seed(103);
      Seq2Seq model(decode_model(norm_first));
      model.to(DType::f64);
      model.eval();
      NoGradGuard no_grad;
      const Tensor memory = model.encode(kSrc, kSrcLengths).value();
      Seq2SeqDecoder cached(model, memory, kSrcLengths, true), fresh(model, memory, kSrcLengths, false);
      const std::vector<std::vector<int64_t>> steps = {{1, 1, 1}, {3, 4, 5}, {6, 0, 2}, {4, 4, 4}, {5, 3, 0},
                                                       {0, 6, 3}, {2, 2, 1}, {3, 5, 6}};
      std::vector<std::vector<int64_t>> fed(3);
      std::vector<int64_t> lengths = kSrcLengths;
      Indices src = kSrc;
      for (size_t t = 0; t < steps.size(); ++t) {
        const Tensor a = cached.step(steps[t]), b = fresh.step(steps[t]);
        BOOST_TEST(a.shape() == (Shape{3, 7}));
        BOOST_TEST(max_abs_diff(a, b) < 1e-10, "step " << t);
        for (size_t r = 0; r < 3; ++r) fed[r].push_back(steps[t][r]);
        // Teacher forcing over every token so far gives the same last row.
        std::vector<int64_t> flat;
        for (const auto& row : fed) flat.insert(flat.end(), row.begin(), row.end());
        const int64_t T = static_cast<int64_t>(t) + 1;
        const Tensor full = model(src, lengths, Indices(Shape{3, T}, flat), {T, T, T}).value();
        BOOST_TEST(max_abs_diff(a, full.select(1, T - 1)) < 1e-10, "step " << t);
        if (t == 3) {  // rows become (old 2, old 0, old 0)
          const std::vector<int64_t> rows = {2, 0, 0};
          cached.reorder(rows);
          fresh.reorder(rows);
          fed = {fed[2], fed[0], fed[0]};
          lengths = {kSrcLengths[2], kSrcLengths[0], kSrcLengths[0]};
          std::vector<int64_t> gathered;
          for (const int64_t r : rows) {
            const Indices one = row_of(kSrc, r);
            gathered.insert(gathered.end(), one.data.begin(), one.data.end());
          }
          src = Indices(Shape{3, 6}, gathered);
        }
      }
      BOOST_TEST(cached.length() == 8);
      AG_CHECK_THROWS_WITH(cached.step({1, 1, 1}), std::invalid_argument, "Seq2SeqDecoder::step", "max_len=8");
    }
  }
}

BOOST_AUTO_TEST_CASE(beam_width_one_is_greedy_and_the_cache_changes_no_choice) {
  int ended = 0, cut = 0;
  for (const uint64_t seed : {104, 105, 106}) {
    manual_seed(seed);
    Seq2Seq model(decode_model(seed % 2 == 0));
    model.to(DType::f64);
    model.train();  // decoding switches to eval and back
    for (const double alpha : {0.0, 0.6}) {
      Seq2SeqDecodeOptions o{.bos = kBos, .eos = kEos, .max_tokens = 6, .beam = 1, .length_penalty = alpha};
      const std::vector<Hypothesis> greedy = greedy_decode(model, kSrc, kSrcLengths, o);
      const std::vector<Hypothesis> beam = beam_search(model, kSrc, kSrcLengths, o);
      o.use_cache = false;
      const std::vector<Hypothesis> greedy_fresh = greedy_decode(model, kSrc, kSrcLengths, o);
      BOOST_TEST(model.is_training());
      BOOST_REQUIRE(greedy.size() == 3u);
      BOOST_REQUIRE(beam.size() == 3u);
      for (size_t b = 0; b < 3; ++b) {
        BOOST_TEST(beam[b].tokens == greedy[b].tokens, boost::test_tools::per_element());
        BOOST_TEST(greedy_fresh[b].tokens == greedy[b].tokens, boost::test_tools::per_element());
        BOOST_TEST(beam[b].ended == greedy[b].ended);
        BOOST_TEST(std::abs(beam[b].log_prob - greedy[b].log_prob) < 1e-12);
        BOOST_TEST(std::abs(beam[b].score - greedy[b].log_prob / length_penalty(static_cast<int64_t>(greedy[b].tokens.size()) + (greedy[b].ended ? 1 : 0), alpha)) < 1e-12);
        // The reported log-probability is the model's.
        model.eval();
        BOOST_TEST(std::abs(greedy[b].log_prob - sequence_log_prob(model, row_of(kSrc, static_cast<int64_t>(b)),
                                                                   kSrcLengths[b], greedy[b])) < 1e-9);
        model.train();
        ended += greedy[b].ended ? 1 : 0;
        cut += greedy[b].ended ? 0 : 1;
      }
    }
  }
  // Both ways a hypothesis stops were exercised.
  BOOST_TEST(ended > 0);
  BOOST_TEST(cut > 0);
}

// Wider beams: the winner's log-probability is the model's for that output (so the reordered
// caches fed each hypothesis its own history), the cache changes nothing, and with alpha 0 the
// winner is at least as likely as greedy's output.
BOOST_AUTO_TEST_CASE(beam_search_scores_are_the_models_log_probabilities) {
  manual_seed(107);
  Seq2Seq model(decode_model(false));
  model.to(DType::f64);
  model.eval();
  for (const int64_t width : {2, 4}) {
    Seq2SeqDecodeOptions o{.bos = kBos, .eos = kEos, .max_tokens = 7, .beam = width, .length_penalty = 0.0};
    const std::vector<Hypothesis> beam = beam_search(model, kSrc, kSrcLengths, o);
    const std::vector<Hypothesis> greedy = greedy_decode(model, kSrc, kSrcLengths, o);
    o.use_cache = false;
    const std::vector<Hypothesis> fresh = beam_search(model, kSrc, kSrcLengths, o);
    for (size_t b = 0; b < 3; ++b) {
      BOOST_TEST(fresh[b].tokens == beam[b].tokens, boost::test_tools::per_element());
      BOOST_TEST(std::abs(beam[b].log_prob - sequence_log_prob(model, row_of(kSrc, static_cast<int64_t>(b)),
                                                              kSrcLengths[b], beam[b])) < 1e-9);
      if (beam[b].ended && greedy[b].ended) BOOST_TEST(beam[b].log_prob >= greedy[b].log_prob - 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_options_name_the_function_and_the_value) {
  Seq2Seq model(decode_model(false));
  const Seq2SeqDecodeOptions ok{.bos = kBos, .eos = kEos};
  Seq2SeqDecodeOptions o = ok;
  o.beam = 0;
  AG_CHECK_THROWS_WITH(beam_search(model, kSrc, kSrcLengths, o), std::invalid_argument, "beam_search",
                       "beam width", "got 0");
  o = ok;
  o.eos = 7;
  AG_CHECK_THROWS_WITH(greedy_decode(model, kSrc, kSrcLengths, o), std::invalid_argument, "greedy_decode", "eos=7",
                       "tgt_vocab=7");
  o = ok;
  o.max_tokens = 9;
  AG_CHECK_THROWS_WITH(beam_search(model, kSrc, kSrcLengths, o), std::invalid_argument, "max_tokens 9", "max_len=8");
  o = ok;
  o.length_penalty = -1.0;
  AG_CHECK_THROWS_WITH(beam_search(model, kSrc, kSrcLengths, o), std::invalid_argument, "length_penalty", "-1");
  AG_CHECK_THROWS_WITH(greedy_decode(model, Indices(Shape{1, 9}, std::vector<int64_t>(9, 1)), {9}, ok),
                       std::invalid_argument, "greedy_decode", "max_len=8");
  AG_CHECK_THROWS_WITH(greedy_decode(model, kSrc, {3, 7, 1}, ok), std::invalid_argument, "greedy_decode",
                       "src_lengths [3, 7, 1]");
  AG_CHECK_THROWS_WITH(beam_search(model, Indices(Shape{1, 2}, {1, 9}), {2}, ok), std::invalid_argument,
                       "beam_search", "src token 9", "vocab=9");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
