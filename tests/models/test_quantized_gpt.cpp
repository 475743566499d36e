// GPT::quantize (int8 or q4_0 weights for every Linear and the tied head, core/quantize.h): the
// quantized model computes the GPT whose float weights are its dequantized ones, through the
// whole forward, cached and uncached; cached generation equals uncached; its logits stay close
// to the float model's; training through it, f64 models and a second quantization are refused.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "models_support.h"

namespace ag::testing {
namespace {

// d_model 48: one full block of 32 and a partial one in every row; the MLP's second layer reads
// 192 = 6 blocks. vocab 101 rows in the head.
GPTOptions quantized_test_gpt() {
  return {.vocab = 101, .block_size = 24, .d_model = 48, .n_head = 4, .n_layers = 2, .activation = Activation::gelu_tanh};
}

std::unique_ptr<GPT> seeded_gpt(uint64_t seed) {
  manual_seed(seed);
  auto model = std::make_unique<GPT>(quantized_test_gpt());
  model->eval();
  return model;
}

// The same GPT with every Linear weight and the token table replaced by their round trip
// through `format`.
std::unique_ptr<GPT> dequantized_twin(uint64_t seed, WeightFormat format = WeightFormat::int8) {
  auto twin = seeded_gpt(seed);
  NoGradGuard no_grad;
  for (auto& [path, module] : twin->named_modules()) {
    if (auto* l = dynamic_cast<Linear*>(module)) {
      Tensor w = l->weight().value();
      w.copy_(dequantize(quantize(w, format)));
    }
  }
  Tensor table = twin->embed().weight().value();
  table.copy_(dequantize(quantize(table, format)));
  return twin;
}

Indices random_ids(int64_t b, int64_t t, uint64_t seed) {
  std::vector<int64_t> ids(static_cast<size_t>(b * t));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(Generator::bits(seed, i) % 101);
  return Indices(Shape{b, t}, ids);
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (const double v : t.to_vector()) m = std::max(m, std::abs(v));
  return m;
}

BOOST_AUTO_TEST_SUITE(quantized_gpt)

// The token lookup keeps the float table while the twin's is dequantized, so both are fed the
// same embeddings (the quantized model's own lookup) through forward_embedded: every other
// value of the forward (the blocks' Linears, the head) must then agree. 2 x 20 rows go through
// the tiles-and-gemm path of quantized_linear, 1 x 3 through the direct one.
BOOST_AUTO_TEST_CASE(logits_equal_the_gpt_whose_weights_are_dequantized) {
  auto quantized = seeded_gpt(31);
  quantized->quantize(WeightFormat::int8);
  BOOST_TEST(quantized->is_quantized());
  for (TransformerBlock* b : std::vector<TransformerBlock*>{&quantized->block(0), &quantized->block(1)}) {
    BOOST_TEST(b->attn().w_q().is_quantized());
    BOOST_TEST(b->ff_as<PositionwiseFeedForward>().linear2().is_quantized());
  }
  auto twin = dequantized_twin(31);
  NoGradGuard no_grad;
  for (const auto& [b, t] : std::vector<std::pair<int64_t, int64_t>>{{2, 20}, {1, 3}}) {
    const Variable x = quantized->embed()(random_ids(b, t, 5));
    const Tensor got = quantized->forward_embedded(x).value();
    const Tensor want = twin->forward_embedded(x).value();
    BOOST_TEST(max_abs(want) > 0.05);  // logits of a size where 1e-5 means something
    BOOST_TEST(max_abs_diff(got, want) <= 1e-5, b << "x" << t << ": " << max_abs_diff(got, want));
  }
  // The weights differ from the float model's: the twin is not the float model.
  auto float_model = seeded_gpt(31);
  const Variable x = float_model->embed()(random_ids(1, 3, 5));
  BOOST_TEST(max_abs_diff(float_model->forward_embedded(x).value(), twin->forward_embedded(x).value()) > 1e-5);
}

// Rows of the cached forward (one position at a time, the direct int8 path) equal the rows of
// the uncached forward of the whole sequence (the tiled path), and seeded sampling past the
// window draws the same tokens with and without the cache (greedy decoding of this small
// untrained model repeats one token, which would show nothing).
BOOST_AUTO_TEST_CASE(cached_decoding_equals_uncached_on_a_quantized_model) {
  auto model = seeded_gpt(32);
  model->quantize(WeightFormat::int8);
  const Indices all = random_ids(1, 20, 6);
  NoGradGuard no_grad;
  const Tensor full = model->forward(all).value();
  KvCache cache = model->make_cache(1);
  for (int64_t t = 0; t < 20; ++t) {
    const Tensor row = model->forward(Indices(Shape{1, 1}, {all.data[static_cast<size_t>(t)]}), cache).value();
    BOOST_TEST(max_abs_diff(row, full.narrow(1, t, 1)) <= 1e-5, "position " << t);
  }
  GenerateOptions o;
  o.max_new_tokens = 40;  // past the context of 24: the window slides
  o.sampling = {.temperature = 1.0, .seed = 12};
  const std::vector<int64_t> prompt = {3, 50, 7, 99};
  const std::vector<int64_t> cached = generate(*model, prompt, o);
  o.use_cache = false;
  const std::vector<int64_t> uncached = generate(*model, prompt, o);
  BOOST_TEST(cached == uncached);
  BOOST_TEST(std::set<int64_t>(cached.begin(), cached.end()).size() > 1u);
}

// How far int8 weights move the logits of this model (measured: 3.6e-3 of the logits' largest
// magnitude; the bound leaves a factor of about 3), and loss() under NoGradGuard scores the
// quantized logits.
BOOST_AUTO_TEST_CASE(quantized_logits_stay_close_to_the_float_models) {
  auto float_model = seeded_gpt(33);
  auto quantized = seeded_gpt(33);
  quantized->quantize(WeightFormat::int8);
  NoGradGuard no_grad;
  const Indices ids = random_ids(2, 24, 7);
  const Tensor want = float_model->forward(ids).value();
  const Tensor got = quantized->forward(ids).value();
  const double relative = max_abs_diff(got, want) / max_abs(want);
  BOOST_TEST_MESSAGE("int8 logits: max |diff| / max |logit| = " << relative);
  BOOST_TEST(relative > 0.0);
  BOOST_TEST(relative <= 1e-2);
  const Indices targets = random_ids(2, 24, 8);
  const double loss = quantized->loss(ids, targets).item();
  BOOST_TEST(std::abs(loss - cross_entropy(Variable(got), targets).item()) <= 1e-12);
  BOOST_TEST(std::abs(loss - float_model->loss(ids, targets).item()) <= 1e-2);
}

BOOST_AUTO_TEST_CASE(training_through_a_quantized_model_is_refused) {
  auto model = seeded_gpt(34);
  model->quantize(WeightFormat::int8);
  model->train();
  const Indices ids = random_ids(1, 5, 9);
  AG_CHECK_THROWS_WITH(model->loss(ids, random_ids(1, 5, 10)), std::logic_error, "blocks.0.attn.w_q.weight",
                       "quantized to int8", "NoGradGuard");
  // The head alone, fed embeddings that require grad.
  Variable h(randn({1, 2, 48}, 1, DType::f32), true);
  AG_CHECK_THROWS_WITH(model->head(h), std::logic_error, "embed.weight", "no gradient");
  // Frozen weights do not help: the input still wants a gradient.
  for (Variable& p : model->parameters()) p.set_requires_grad(false);
  AG_CHECK_THROWS_WITH(model->forward_embedded(h), std::logic_error, "quantized to int8");
}

BOOST_AUTO_TEST_CASE(f64_models_and_a_second_quantization_are_refused) {
  auto model = seeded_gpt(35);
  model->to(DType::f64);
  AG_CHECK_THROWS_WITH(model->quantize(WeightFormat::int8), std::invalid_argument, "GPT::quantize (int8)", "f64", "float32");
  BOOST_TEST(!model->is_quantized());
  auto again = seeded_gpt(35);
  again->quantize(WeightFormat::int8);
  AG_CHECK_THROWS_WITH(again->quantize(WeightFormat::int8), std::invalid_argument, "already quantized");
  // Converted after quantizing: the int8 copies no longer describe the weights.
  again->to(DType::f64);
  NoGradGuard no_grad;
  AG_CHECK_THROWS_WITH(again->forward(random_ids(1, 3, 11)), std::invalid_argument, "quantized_linear", "f64",
                       "quantize after converting");
}

// q4_0: the tiles-and-gemm path (2 x 20 rows) computes the GPT whose weights are the q4_0 round
// trip, as int8 does; the direct path (a cached token, or a window of up to 8 rows) also rounds
// x to int8 per block of 32 (core/quantize.h), so it is held to the uncached forward through
// the same path (8 positions: direct either way), and to the tiled forward by the measured
// distance.
BOOST_AUTO_TEST_CASE(a_q4_0_model_computes_its_dequantized_twin) {
  auto quantized = seeded_gpt(36);
  quantized->quantize(WeightFormat::q4_0);
  BOOST_TEST(std::string(format_name(quantized->quantized_format())) == "q4_0");
  BOOST_TEST(std::string(format_name(quantized->block(1).attn().w_o().quantized_weight().format)) == "q4_0");
  auto twin = dequantized_twin(36, WeightFormat::q4_0);
  NoGradGuard no_grad;
  const Variable x = quantized->embed()(random_ids(2, 20, 13));
  const Tensor want = twin->forward_embedded(x).value();
  BOOST_TEST(max_abs(want) > 0.05);
  BOOST_TEST(max_abs_diff(quantized->forward_embedded(x).value(), want) <= 1e-5);

  for (const int64_t t : {int64_t{8}, int64_t{20}}) {
    const Indices all = random_ids(1, t, 14);
    const Tensor full = quantized->forward(all).value();
    KvCache cache = quantized->make_cache(1);
    double worst = 0;
    for (int64_t p = 0; p < t; ++p) {
      const Tensor row = quantized->forward(Indices(Shape{1, 1}, {all.data[static_cast<size_t>(p)]}), cache).value();
      worst = std::max(worst, max_abs_diff(row, full.narrow(1, p, 1)));
    }
    BOOST_TEST_MESSAGE("q4_0, " << t << " positions: cached against uncached, max |diff| / max |logit| = "
                                << worst / max_abs(full));
    // 8 positions: the same path, float differences only. 20: x's rounding (measured 4.4e-3).
    BOOST_TEST(worst / max_abs(full) <= (t == 8 ? 1e-5 : 1e-2), t << " positions: " << worst / max_abs(full));
  }
}

// How far q4_0 weights move the logits of this model (measured: 7.1e-2 of the logits' largest
// magnitude, about 20 times int8's; the bound leaves a factor of 2), and the refusals name the
// format.
BOOST_AUTO_TEST_CASE(q4_0_logits_stay_near_the_float_models_and_training_is_refused) {
  auto float_model = seeded_gpt(37);
  auto quantized = seeded_gpt(37);
  quantized->quantize(WeightFormat::q4_0);
  {
    NoGradGuard no_grad;
    const Indices ids = random_ids(2, 24, 15);
    const Tensor want = float_model->forward(ids).value();
    const double relative = max_abs_diff(quantized->forward(ids).value(), want) / max_abs(want);
    BOOST_TEST_MESSAGE("q4_0 logits: max |diff| / max |logit| = " << relative);
    BOOST_TEST(relative > 1e-3);
    BOOST_TEST(relative <= 0.15);
  }
  quantized->train();
  AG_CHECK_THROWS_WITH(quantized->loss(random_ids(1, 5, 9), random_ids(1, 5, 10)), std::logic_error,
                       "blocks.0.attn.w_q.weight", "quantized to q4_0");
  AG_CHECK_THROWS_WITH(quantized->quantize(WeightFormat::int8), std::invalid_argument, "GPT::quantize (int8)",
                       "already quantized (q4_0)");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
