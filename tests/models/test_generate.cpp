// Incremental decoding and generation (models/gpt/generate.h): cached logits equal a full forward at
// every position, also after the window slides; the cache really saves work; greedy and sampled
// continuations are identical with and without it; streaming, prompt cropping, the model's mode
// and bad options.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "models_support.h"

namespace ag::testing {

namespace {

// A model whose block_size (6) the tests overrun: f64, eval, seeded.
GPTOptions windowed_gpt() { return {.vocab = 11, .block_size = 6, .d_model = 12, .n_head = 3, .n_layers = 2}; }

std::unique_ptr<GPT> f64_model(const GPTOptions& o, uint64_t seed) {
  manual_seed(seed);
  auto m = std::make_unique<GPT>(o);
  m->to(DType::f64);
  m->eval();
  // Larger weights than the init's 0.02, so that logits differ clearly from position to position.
  for (auto& [name, p] : m->named_parameters()) {
    if (name.find("norm") == std::string::npos) p.mutable_value().copy_(randn(p.shape(), seed + p.numel()));
  }
  return m;
}

// The logits of the last position of `window`, from one full forward.
std::vector<double> full_last_logits(GPT& model, const std::vector<int64_t>& window) {
  NoGradGuard no_grad;
  const Tensor l = model(row_ids(window)).value();
  return l.select(0, 0).select(0, l.shape()[1] - 1).to_vector();
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  BOOST_REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

const std::vector<int64_t> kSequence = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};

}  // namespace

BOOST_AUTO_TEST_SUITE(incremental_decoding)

// Window shifts 1 (nanoGPT's crop), 2 and 6 (the whole block): the cached decoder's logits equal
// a full forward over the window [window_start, end) and the uncached decoder's at every step.
BOOST_DATA_TEST_CASE(cached_logits_equal_a_full_forward_at_every_position, boost::unit_test::data::make({1, 2, 6}),
                     shift) {
  auto model = f64_model(windowed_gpt(), 5);
  GPTDecoder cached(*model, {.use_cache = true, .window_shift = shift});
  GPTDecoder uncached(*model, {.use_cache = false, .window_shift = shift});
  const std::vector<int64_t> prompt(kSequence.begin(), kSequence.begin() + 3);
  std::vector<double> a = cached.feed(prompt), b = uncached.feed(prompt);
  int slides = 0;
  for (size_t n = 3;; ++n) {
    const std::vector<int64_t>& seq = cached.tokens();
    const int64_t start = cached.window_start();
    BOOST_TEST(start == uncached.window_start());
    BOOST_TEST(static_cast<int64_t>(seq.size()) - start <= 6);
    if (shift == 1) BOOST_TEST(start == std::max<int64_t>(0, static_cast<int64_t>(seq.size()) - 6));  // the crop
    const std::vector<double> full = full_last_logits(*model, std::vector<int64_t>(seq.begin() + start, seq.end()));
    BOOST_TEST(max_diff(a, full) < 1e-10, "step " << n);
    BOOST_TEST(max_diff(a, b) < 1e-10, "step " << n);
    if (n == kSequence.size()) break;
    const int64_t before = cached.window_start();
    a = cached.feed({kSequence[n]});
    b = uncached.feed({kSequence[n]});
    slides += cached.window_start() != before ? 1 : 0;
  }
  BOOST_TEST(slides >= 2);  // the window really moved, more than once
}

// Chunks of several tokens and a batch of 2 through GPT::forward(ids, cache): the rows equal
// those of the full causal forward (the blocks' own forward with the cache and the offset
// causal mask); without the cache a later chunk gives other rows.
BOOST_AUTO_TEST_CASE(chunks_through_the_cache_equal_the_full_forward_rows) {
  auto model = f64_model(windowed_gpt(), 6);
  const Indices all(Shape{2, 6}, {1, 2, 3, 4, 5, 6, 10, 9, 8, 7, 6, 5});
  const Tensor full = model->forward(all).value();
  KvCache cache = model->make_cache(2);
  int64_t at = 0;
  for (const int64_t n : {3, 1, 2}) {
    std::vector<int64_t> chunk;
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t t = at; t < at + n; ++t) chunk.push_back(all.data[static_cast<size_t>(b * 6 + t)]);
    }
    const Variable rows = model->forward(Indices(Shape{2, n}, chunk), cache);
    BOOST_TEST(!rows.requires_grad());  // inference: no graph
    BOOST_TEST(max_abs_diff(rows.value(), full.narrow(1, at, n)) < 1e-10, "chunk at " << at);
    if (at > 0) {
      NoGradGuard no_grad;
      const Tensor alone = model->forward(Indices(Shape{2, n}, chunk)).value();
      BOOST_TEST(max_abs_diff(alone, full.narrow(1, at, n)) > 1e-3, "chunk at " << at);
    }
    at += n;
    BOOST_TEST(cache.length() == at);
  }
}

// The point of the cache: inside the window each new token costs one position through the
// model, and the cache holds exactly the window. Without the cache every step reruns the window.
BOOST_AUTO_TEST_CASE(the_cache_costs_one_position_per_token_inside_the_window) {
  auto model = f64_model(windowed_gpt(), 7);
  GPTDecoder cached(*model, {.use_cache = true});
  GPTDecoder uncached(*model, {.use_cache = false});
  cached.feed({1, 2});
  uncached.feed({1, 2});
  for (int64_t n = 3; n <= 6; ++n) {
    cached.feed({3});
    uncached.feed({3});
    BOOST_TEST(cached.positions_computed() == n);  // 2 + one per token
    BOOST_TEST(cached.cache()->length() == n);
  }
  BOOST_TEST(uncached.positions_computed() == 2 + 3 + 4 + 5 + 6);
  BOOST_TEST(uncached.cache() == nullptr);
  // Past the window (shift 1) the cache is rebuilt from the window: full, 6 positions again.
  cached.feed({4});
  BOOST_TEST(cached.window_start() == 1);
  BOOST_TEST(cached.cache()->length() == 6);
  BOOST_TEST(cached.positions_computed() == 6 + 6);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(generation)

// vocab_limit keeps the draws below it (a tokenizer shorter than the model's table): sampled
// hot, every id of 40 is below 3, where without it some are not.
BOOST_AUTO_TEST_CASE(vocab_limit_keeps_every_draw_below_it) {
  auto model = f64_model(windowed_gpt(), 8);
  GenerateOptions o;
  o.max_new_tokens = 40;
  o.sampling = {.temperature = 2.0, .top_k = 0, .top_p = 1.0, .seed = 3};
  const std::vector<int64_t> free = generate(*model, {2, 7, 1}, o);
  o.vocab_limit = 3;
  const std::vector<int64_t> limited = generate(*model, {2, 7, 1}, o);
  BOOST_TEST(std::ranges::any_of(free, [](int64_t t) { return t >= 3; }));
  BOOST_TEST(std::ranges::all_of(limited, [](int64_t t) { return t < 3; }));
}

// Greedy decoding past the window: with and without the cache, and against argmax over a full
// forward of the last block_size tokens written out here.
BOOST_AUTO_TEST_CASE(greedy_continuation_is_identical_with_and_without_the_cache) {
  auto model = f64_model(windowed_gpt(), 8);
  GenerateOptions o;
  o.max_new_tokens = 15;
  o.sampling.temperature = 0.0;
  const std::vector<int64_t> prompt = {2, 7, 1};
  const std::vector<int64_t> with_cache = generate(*model, prompt, o);
  o.use_cache = false;
  const std::vector<int64_t> without = generate(*model, prompt, o);
  BOOST_TEST(with_cache == without);
  std::vector<int64_t> seq = prompt, reference;
  for (int n = 0; n < 15; ++n) {
    const std::vector<int64_t> window(seq.end() - std::min<std::ptrdiff_t>(6, static_cast<std::ptrdiff_t>(seq.size())), seq.end());
    const std::vector<double> l = full_last_logits(*model, window);
    reference.push_back(std::max_element(l.begin(), l.end()) - l.begin());
    seq.push_back(reference.back());
  }
  BOOST_TEST(with_cache == reference);
  BOOST_TEST(std::set<int64_t>(reference.begin(), reference.end()).size() > 1u);  // not a constant stream
}

BOOST_AUTO_TEST_CASE(sampling_is_seeded_and_identical_with_and_without_the_cache) {
  auto model = f64_model(windowed_gpt(), 9);
  GenerateOptions o;
  o.max_new_tokens = 20;
  o.sampling = {.temperature = 1.5, .top_k = 8, .top_p = 0.95, .seed = 3};
  const std::vector<int64_t> a = generate(*model, {4}, o);
  o.use_cache = false;
  BOOST_TEST(generate(*model, {4}, o) == a);
  o.use_cache = true;
  BOOST_TEST(generate(*model, {4}, o) == a);  // same seed, same tokens
  o.sampling.seed = 4;
  BOOST_TEST(generate(*model, {4}, o) != a);
  BOOST_TEST(a.size() == 20u);
}

BOOST_AUTO_TEST_CASE(streaming_sees_each_token_as_drawn_and_can_stop) {
  auto model = f64_model(windowed_gpt(), 10);
  GenerateOptions o;
  o.max_new_tokens = 9;
  o.sampling.seed = 1;
  std::vector<int64_t> streamed;
  o.on_token = [&](int64_t t) {
    streamed.push_back(t);
    return true;
  };
  const std::vector<int64_t> all = generate(*model, {1, 2}, o);
  BOOST_TEST(streamed == all);
  BOOST_TEST(all.size() == 9u);
  streamed.clear();
  o.on_token = [&](int64_t t) {
    streamed.push_back(t);
    return streamed.size() < 3;
  };
  const std::vector<int64_t> stopped = generate(*model, {1, 2}, o);
  BOOST_TEST(stopped.size() == 3u);
  BOOST_TEST(stopped == std::vector<int64_t>(all.begin(), all.begin() + 3));
}

BOOST_AUTO_TEST_CASE(a_prompt_longer_than_the_context_is_cropped_or_refused) {
  auto model = f64_model(windowed_gpt(), 11);
  GenerateOptions o;
  o.max_new_tokens = 4;
  o.sampling.temperature = 0.0;
  const std::vector<int64_t> long_prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<int64_t> last_six(long_prompt.end() - 6, long_prompt.end());
  BOOST_TEST(generate(*model, long_prompt, o) == generate(*model, last_six, o));
  o.crop_prompt = false;
  AG_CHECK_THROWS_WITH(generate(*model, long_prompt, o), std::invalid_argument, "9 tokens", "block_size=6",
                       "crop_prompt");
  BOOST_TEST(generate(*model, last_six, o).size() == 4u);  // exactly block_size is allowed
}

BOOST_AUTO_TEST_CASE(generation_runs_in_eval_mode_and_restores_the_mode) {
  GPTOptions opts = windowed_gpt();
  opts.dropout = 0.5;
  auto model = f64_model(opts, 12);
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.sampling.seed = 2;
  const std::vector<int64_t> in_eval = generate(*model, {3, 3}, o);
  model->train();
  BOOST_TEST(generate(*model, {3, 3}, o) == in_eval);  // no dropout while generating
  BOOST_TEST(model->is_training());
}

BOOST_AUTO_TEST_CASE(bad_options_and_prompts_are_refused) {
  auto model = f64_model(windowed_gpt(), 13);
  const auto refused = [&](auto change, std::initializer_list<std::string> parts) {
    GenerateOptions o;
    o.max_new_tokens = 2;
    std::vector<int64_t> prompt = {1, 2};
    change(o, prompt);
    bool thrown = false;
    try {
      generate(*model, prompt, o);
    } catch (const std::invalid_argument& e) {
      thrown = true;
      for (const std::string& part : parts) BOOST_TEST(std::string(e.what()).find(part) != std::string::npos, e.what());
    }
    BOOST_TEST(thrown, *parts.begin());
  };
  using P = std::vector<int64_t>;
  refused([](GenerateOptions& o, P&) { o.sampling.temperature = -0.5; }, {"temperature", "-0.5"});
  refused([](GenerateOptions& o, P&) { o.sampling.temperature = NAN; }, {"temperature", "nan"});
  refused([](GenerateOptions& o, P&) { o.sampling.top_k = -1; }, {"top_k", "-1"});
  refused([](GenerateOptions& o, P&) { o.sampling.top_p = 0.0; }, {"top_p", "(0, 1]", "got 0"});
  refused([](GenerateOptions& o, P&) { o.sampling.top_p = 1.5; }, {"top_p", "1.5"});
  refused([](GenerateOptions& o, P&) { o.max_new_tokens = -1; }, {"max_new_tokens", "-1"});
  refused([](GenerateOptions& o, P&) { o.window_shift = 0; }, {"window_shift", "[1, block_size=6]", "0"});
  refused([](GenerateOptions& o, P&) { o.window_shift = 7; }, {"window_shift", "7"});
  refused([](GenerateOptions& o, P&) { o.vocab_limit = 12; }, {"vocab_limit 12", "[0, vocab=11]"});
  refused([](GenerateOptions&, P& p) { p.clear(); }, {"prompt is empty"});
  refused([](GenerateOptions&, P& p) { p = {1, 11, 2}; }, {"token id 11", "position 1", "vocab=11"});
  refused([](GenerateOptions&, P& p) { p = {-3}; }, {"token id -3"});
  GPTDecoder decoder(*model);
  AG_CHECK_THROWS_WITH(decoder.feed({}), std::invalid_argument, "GPTDecoder::feed", "empty");
  AG_CHECK_THROWS_WITH(decoder.feed({12}), std::invalid_argument, "token id 12");
  // Refused before the model runs: nothing was fed.
  BOOST_TEST(decoder.tokens().empty());
  BOOST_TEST(decoder.positions_computed() == 0);
}

// GPT::forward with a cache refuses a cache that does not fit, a window that would overflow,
// and grad-mode misuse of the layer-level entry point.
BOOST_AUTO_TEST_CASE(a_cache_that_does_not_fit_is_refused) {
  auto model = f64_model(windowed_gpt(), 14);
  KvCache f32_cache(KvCacheOptions{.n_layers = 2, .batch = 1, .n_head = 3, .d_k = 4, .max_len = 6});
  AG_CHECK_THROWS_WITH(model->forward(row_ids({1}), f32_cache), std::invalid_argument, "f32", "f64", "make_cache(1)");
  KvCache wrong_heads(KvCacheOptions{.n_layers = 2, .batch = 1, .n_head = 2, .d_k = 6, .max_len = 6, .dtype = DType::f64});
  AG_CHECK_THROWS_WITH(model->forward(row_ids({1}), wrong_heads), std::invalid_argument, "n_head=2", "n_head=3");
  KvCache cache = model->make_cache(1);
  AG_CHECK_THROWS_WITH(model->forward(Indices(Shape{2, 1}, {1, 2}), cache), std::invalid_argument, "batch=1", "(2, 1)");
  model->forward(row_ids({1, 2, 3, 4}), cache);
  AG_CHECK_THROWS_WITH(model->forward(row_ids({1, 2, 3}), cache), std::invalid_argument, "holds 4", "block_size=6",
                       "reset()");
  AG_CHECK_THROWS_WITH(model->forward(row_ids({1, 11}), cache), std::invalid_argument, "token id 11");
  BOOST_TEST(cache.length() == 4);  // nothing was appended by the refused calls
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
