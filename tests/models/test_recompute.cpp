// Activation recompute in the models (GPT::set_recompute, Seq2Seq::set_recompute): with dropout
// on, in f32, over two micro-batches whose gradients add up, every parameter's gradient and the
// loss are the very bits of the plain run; the graph between forward and backward holds less;
// generation (no graph) is untouched by the switch.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "models_support.h"

namespace ag::testing {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  // f32 values are exact in double: equal doubles are equal bits.
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.to_vector() == b.to_vector();
}

void check_same_gradients(const Module& plain, const Module& recomputed) {
  const NamedVariables p = plain.named_parameters(), q = recomputed.named_parameters();
  BOOST_TEST_REQUIRE(p.size() == q.size());
  int64_t compared = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    BOOST_TEST_CONTEXT(p[i].first) {
      BOOST_TEST_REQUIRE(p[i].second.grad().defined());
      BOOST_TEST(same_bits(p[i].second.grad(), q[i].second.grad()));
      ++compared;
    }
  }
  BOOST_TEST(compared > 10);
}

GPTOptions gpt_with_dropout() {
  return {.vocab = 11, .block_size = 8, .d_model = 16, .n_head = 2, .n_layers = 3, .dropout = 0.2};
}

Seq2SeqOptions seq2seq_with_dropout(bool norm_first) {
  return {.src_vocab = 9, .tgt_vocab = 8, .max_len = 8, .d_model = 16, .n_head = 2, .d_ff = 24,
          .n_encoder_layers = 2, .n_decoder_layers = 3, .dropout = 0.2, .norm_first = norm_first};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recompute_models)

BOOST_AUTO_TEST_CASE(gpt_gradients_are_the_plain_runs_bits) {
  manual_seed(21);
  GPT plain(gpt_with_dropout());
  manual_seed(21);
  GPT again(gpt_with_dropout());
  again.set_recompute(true);
  plain.train();
  again.train();
  const Indices ids(Shape{2, 8}, {1, 4, 2, 9, 3, 3, 7, 0, 5, 10, 6, 2, 8, 1, 4, 6});
  const Indices targets(Shape{2, 8}, {4, 2, 9, 3, 3, 7, 0, 5, 10, 6, 2, 8, 1, 4, 6, 2});
  for (uint64_t micro = 0; micro < 2; ++micro) {  // the second adds into the first's gradients
    default_generator().set_step(micro);
    Variable lp = mul(plain.loss(ids, targets), 0.5);
    default_generator().set_step(micro);
    Variable la = mul(again.loss(ids, targets), 0.5);
    BOOST_TEST(same_bits(lp.value(), la.value()));
    lp.backward();
    la.backward();
  }
  check_same_gradients(plain, again);
}

BOOST_AUTO_TEST_CASE(seq2seq_gradients_are_the_plain_runs_bits) {
  // Padding on both sides; the encoder's output is read by every decoder layer.
  const Indices src(Shape{2, 6}, {1, 2, 3, 4, 0, 0, 5, 6, 7, 8, 2, 1});
  const std::vector<int64_t> src_lengths = {4, 6};
  const Indices tgt(Shape{2, 5}, {1, 3, 5, 2, 0, 1, 4, 6, 7, 2});
  const std::vector<int64_t> tgt_lengths = {4, 5};
  const Indices tgt_out(Shape{2, 5}, {3, 5, 2, 7, -100, 4, 6, 7, 2, 3});
  for (const bool norm_first : {false, true}) {
    BOOST_TEST_CONTEXT("norm_first=" << norm_first) {
      manual_seed(33);
      Seq2Seq plain(seq2seq_with_dropout(norm_first));
      manual_seed(33);
      Seq2Seq again(seq2seq_with_dropout(norm_first));
      again.set_recompute(true);
      plain.train();
      again.train();
      for (uint64_t micro = 0; micro < 2; ++micro) {
        default_generator().set_step(micro);
        Variable lp = cross_entropy(plain(src, src_lengths, tgt, tgt_lengths), tgt_out, {.ignore_index = -100});
        default_generator().set_step(micro);
        Variable la = cross_entropy(again(src, src_lengths, tgt, tgt_lengths), tgt_out, {.ignore_index = -100});
        BOOST_TEST(same_bits(lp.value(), la.value()));
        lp.backward();
        la.backward();
      }
      check_same_gradients(plain, again);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_gpt_graph_holds_less_between_forward_and_backward) {
  // Eight blocks over (4, 64, 64) activations: the plain graph keeps every block's
  // intermediates (about 17 activations of (B, T, d) a block, the attention's too), the
  // recomputed one each block's input.
  const GPTOptions o{.vocab = 50, .block_size = 64, .d_model = 64, .n_head = 4, .n_layers = 8};
  auto held = [&](bool recomputed) {
    manual_seed(4);
    GPT model(o);
    model.set_recompute(recomputed);
    std::vector<int64_t> v(4 * 64);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 7) % 50);
    const Indices ids(Shape{4, 64}, v);
    release_cached_memory();
    const std::size_t before = memory_stats().live;
    Variable loss = model.loss(ids, ids);
    const std::size_t after = memory_stats().live - before;
    loss.backward();
    return after;
  };
  const std::size_t plain = held(false), recomputed = held(true);
  const std::size_t activation = 4 * 64 * 64 * sizeof(float);
  BOOST_TEST_MESSAGE("held after forward: plain " << plain << " bytes, recomputed " << recomputed);
  BOOST_TEST(plain >= 8 * 10 * activation);
  BOOST_TEST(recomputed <= 8 * 2 * activation + 4 * activation);
}

BOOST_AUTO_TEST_CASE(generation_is_the_same_with_the_switch_on) {
  manual_seed(8);
  GPT model(gpt_with_dropout());
  model.eval();
  const Indices ids(Shape{1, 5}, {1, 2, 3, 4, 5});
  const Tensor off = model.forward(ids).value();
  model.set_recompute(true);
  const Tensor on = model.forward(ids).value();
  KvCache cache = model.make_cache(1);
  const Tensor cached = model.forward(ids, cache).value();
  BOOST_TEST(same_bits(off, on));
  BOOST_TEST(max_abs_diff(off, cached) < 1e-5);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
