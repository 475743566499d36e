// Seq2Seq (models/seq2seq/seq2seq.h): the state_dict keys, f64 gradient checks of the whole model on
// ids and on embedded inputs with padding on both sides (a source of length 1 beside one of the
// maximum), padding that changes neither the loss nor any gradient, and bad input.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "models_support.h"

namespace ag::testing {

namespace {

// Small enough for gradient checks: about 1,700 parameters with one layer a side.
Seq2SeqOptions small_seq2seq(bool norm_first, PositionalKind positional = PositionalKind::learned) {
  return {.src_vocab = 7, .tgt_vocab = 6, .max_len = 8, .d_model = 8, .n_head = 2, .d_ff = 12,
          .n_encoder_layers = 1, .n_decoder_layers = 2, .dropout = 0.1, .norm_first = norm_first,
          .positional = positional};
}

// Every key bias of every attention: softmax makes its gradient zero.
std::vector<Variable> key_biases(Seq2Seq& m) {
  std::vector<Variable> out;
  for (size_t i = 0; i < m.encoder().size(); ++i) out.push_back(m.encoder().block(i).attn().w_k().bias());
  for (size_t i = 0; i < m.decoder().size(); ++i) {
    out.push_back(m.decoder().layer(i).self_attn().w_k().bias());
    out.push_back(m.decoder().layer(i).multihead_attn().w_k().bias());
  }
  return out;
}

GradcheckOptions with_parameters(Seq2Seq& m, const std::vector<Variable>& zero_ok) {
  m.to(DType::f64);
  GradcheckOptions o;
  for (const Variable& p : m.parameters()) o.params.push_back(p);
  o.zero_ok = zero_ok;
  return o;
}

// (B, S) source with lengths {1, 5, 3}, (B, T) target with lengths {4, 1, 2}; padding holds 0.
const Indices kSrc(Shape{3, 5}, {4, 0, 0, 0, 0, 1, 2, 3, 6, 5, 2, 2, 1, 0, 0});
const std::vector<int64_t> kSrcLengths = {1, 5, 3};
const Indices kTgt(Shape{3, 4}, {1, 3, 5, 2, 1, 0, 0, 0, 1, 4, 0, 0});
const std::vector<int64_t> kTgtLengths = {4, 1, 2};

}  // namespace

BOOST_AUTO_TEST_SUITE(seq2seq)

BOOST_AUTO_TEST_CASE(parameters_are_named_as_documented) {
  manual_seed(90);
  Seq2Seq model(small_seq2seq(false));
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  BOOST_TEST(names.front() == "src_embed.weight");
  BOOST_TEST(names[1] == "tgt_embed.weight");
  BOOST_TEST(names[2] == "pos.weight");
  BOOST_TEST(names[3] == "encoder.blocks.0.attn.w_q.weight");
  BOOST_TEST(names.back() == "head.bias");
  const auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  // Final norms after post-norm stacks too, as nn.Transformer.
  BOOST_TEST(has("encoder.norm.weight"));
  BOOST_TEST(has("decoder.norm.bias"));
  BOOST_TEST(has("decoder.layers.1.multihead_attn.w_k.weight"));
  BOOST_TEST(has("decoder.layers.0.norm3.weight"));
  BOOST_TEST(model.head_weight().shape() == (Shape{6, 8}));

  // Shared tables and a tied head: one `embed`, no head, the head reads the table.
  Seq2SeqOptions o = small_seq2seq(true, PositionalKind::sinusoidal);
  o.tgt_vocab = 7;
  o.share_embeddings = true;
  o.tie_head = true;
  Seq2Seq tied(o);
  names.clear();
  for (const auto& [name, p] : tied.named_parameters()) names.push_back(name);
  BOOST_TEST(names.front() == "embed.weight");
  BOOST_TEST(!has("src_embed.weight"));
  BOOST_TEST(!has("head.weight"));
  BOOST_TEST(!has("pos.weight"));
  const StateDict state = tied.state_dict();
  BOOST_TEST(std::count_if(state.begin(), state.end(), [](const auto& e) { return e.first == "pos.pe"; }) == 1);
  BOOST_TEST(tied.head_weight().id() == tied.src_embed().weight().id());
  BOOST_TEST(tied.tgt_embed().weight().id() == tied.src_embed().weight().id());
  BOOST_TEST(tied.named_parameters().size() == model.named_parameters().size() - 4);  // tgt_embed, pos, head.*
}

BOOST_AUTO_TEST_CASE(logits_follow_the_masks_on_both_sides) {
  manual_seed(91);
  Seq2Seq model(small_seq2seq(false));
  model.to(DType::f64);
  model.eval();
  const Tensor y = model(kSrc, kSrcLengths, kTgt, kTgtLengths).value();
  BOOST_TEST(y.shape() == (Shape{3, 4, 6}));
  // A padded source token changes nothing; a real one changes every target position of its row.
  Indices src = kSrc;
  src.data[2] = 5;  // row 0, position 2: padding (length 1)
  BOOST_TEST(max_abs_diff(model(src, kSrcLengths, kTgt, kTgtLengths).value(), y) == 0.0);
  src.data[0] = 5;  // row 0, position 0: real
  const Tensor moved = model(src, kSrcLengths, kTgt, kTgtLengths).value();
  BOOST_TEST(max_abs_diff(moved.select(0, 0).select(0, 3), y.select(0, 0).select(0, 3)) > 1e-6);
  BOOST_TEST(max_abs_diff(moved.narrow(0, 1, 2), y.narrow(0, 1, 2)) == 0.0);
  // Causal target: a change at position 2 leaves positions 0 and 1 as they were.
  Indices tgt = kTgt;
  tgt.data[2] = 0;
  const Tensor later = model(kSrc, kSrcLengths, tgt, kTgtLengths).value();
  BOOST_TEST(max_abs_diff(later.select(0, 0).narrow(0, 0, 2), y.select(0, 0).narrow(0, 0, 2)) == 0.0);
  BOOST_TEST(max_abs_diff(later.select(0, 0).select(0, 2), y.select(0, 0).select(0, 2)) > 1e-6);
  // The source lengths reach the encoder and the cross-attention: reading row 0's padding
  // (length 5 instead of 1) changes its logits.
  BOOST_TEST(max_abs_diff(model(kSrc, {5, 5, 3}, kTgt, kTgtLengths).value().select(0, 0), y.select(0, 0)) > 1e-6);
  // forward is decode(encode(src)).
  const Variable memory = model.encode(kSrc, kSrcLengths);
  BOOST_TEST(max_abs_diff(model.decode(kTgt, memory, kSrcLengths, kTgtLengths).value(), y) < 1e-12);
}

// Logits of every position against every parameter (the tables through the lookup), post-norm
// in eval with dropout set, pre-norm in training with dropout active, both positional kinds.
BOOST_AUTO_TEST_CASE(gradcheck_every_parameter_from_ids_with_padding_on_both_sides) {
  for (const bool norm_first : {false, true}) {
    for (const PositionalKind positional : {PositionalKind::learned, PositionalKind::sinusoidal}) {
      BOOST_TEST_CONTEXT("norm_first=" << norm_first << " positional=" << positional_kind_name(positional)) {
        manual_seed(92);
        Seq2Seq model(small_seq2seq(norm_first, positional));
        model.train(norm_first);
        const GradcheckOptions o = with_parameters(model, key_biases(model));
        check_gradients([&](const std::vector<Variable>&) { return model(kSrc, kSrcLengths, kTgt, kTgtLengths); }, {},
                        o);
      }
    }
  }
}

// The embedded inputs of both sides as well; shared tables and a tied head (whose gradient is
// the sum of the lookup's and the head's).
BOOST_AUTO_TEST_CASE(gradcheck_embedded_inputs_and_the_tied_head) {
  for (const bool tied : {false, true}) {
    BOOST_TEST_CONTEXT("tied=" << tied) {
      Seq2SeqOptions so = small_seq2seq(false);
      so.tgt_vocab = 7;
      so.share_embeddings = tied;
      so.tie_head = tied;
      manual_seed(93);
      Seq2Seq model(so);
      std::vector<Variable> zero_ok = key_biases(model);
      if (!tied) {  // without a lookup the tables take no part
        zero_ok.push_back(model.src_embed().weight());
        zero_ok.push_back(model.tgt_embed().weight());
      }
      const GradcheckOptions o = with_parameters(model, zero_ok);
      const Variable src = randn_leaf({3, 5, 8}, 94, "src_x"), tgt = randn_leaf({3, 4, 8}, 95, "tgt_x");
      check_gradients(
          [&](const std::vector<Variable>& in) { return model.forward_embedded(in[0], kSrcLengths, in[1], kTgtLengths); },
          {src, tgt}, o);
      // From ids, the loss with padded targets ignored, as training computes it.
      Indices targets = kTgt;
      for (int64_t b = 0; b < 3; ++b) {
        for (int64_t t = kTgtLengths[static_cast<size_t>(b)]; t < 4; ++t) targets.data[static_cast<size_t>(b * 4 + t)] = -1;
      }
      check_gradients(
          [&](const std::vector<Variable>&) {
            return cross_entropy(model(kSrc, kSrcLengths, kTgt, kTgtLengths), targets, {.ignore_index = -1});
          },
          {}, with_parameters(model, key_biases(model)));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(seq2seq_padding_is_inert)

// The batch above once padded to its longest (S = 5, T = 4) and once with three more pad
// tokens on each side: the loss (padded targets ignored) and every parameter's gradient agree
// within 1e-12 in f64. Dropout is set but off (eval): in training its masks depend on the size.
BOOST_AUTO_TEST_CASE(extra_pad_tokens_change_neither_the_loss_nor_any_gradient) {
  constexpr int64_t kIgnore = -100, kExtra = 3, kPad = 0;
  const auto pad_to = [](const Indices& ids, int64_t T, int64_t value) {
    const int64_t B = ids.shape[0], T0 = ids.shape[1];
    Indices out(Shape{B, T}, std::vector<int64_t>(static_cast<size_t>(B * T), value));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T0; ++t) out.data[static_cast<size_t>(b * T + t)] = ids[b * T0 + t];
    }
    return out;
  };
  // Targets: the next tokens, ignored past each length.
  Indices targets(Shape{3, 4}, {3, 5, 2, 4, 1, 0, 0, 0, 4, 2, 0, 0});
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t t = kTgtLengths[static_cast<size_t>(b)]; t < 4; ++t) targets.data[static_cast<size_t>(b * 4 + t)] = kIgnore;
  }
  for (const bool norm_first : {false, true}) {
    BOOST_TEST_CONTEXT("norm_first=" << norm_first) {
      manual_seed(96);
      Seq2Seq model(small_seq2seq(norm_first));
      model.to(DType::f64);
      model.eval();
      struct Run {
        double loss;
        std::vector<Tensor> grads;
      };
      const auto run = [&](const Indices& src, const std::vector<int64_t>& src_lengths, const Indices& tgt,
                           const std::vector<int64_t>& tgt_lengths, const Indices& tg) {
        model.zero_grad();
        const Variable loss = cross_entropy(model(src, src_lengths, tgt, tgt_lengths), tg, {.ignore_index = kIgnore});
        loss.backward();
        Run r{loss.item(), {}};
        for (const Variable& p : model.parameters()) r.grads.push_back(p.grad().clone());
        return r;
      };
      const Run tight = run(kSrc, kSrcLengths, kTgt, kTgtLengths, targets);
      const Indices src_long = pad_to(kSrc, 5 + kExtra, kPad), tgt_long = pad_to(kTgt, 4 + kExtra, kPad);
      const Indices targets_long = pad_to(targets, 4 + kExtra, kIgnore);
      const Run loose = run(src_long, kSrcLengths, tgt_long, kTgtLengths, targets_long);
      BOOST_TEST(std::abs(loose.loss - tight.loss) < 1e-12);
      const NamedVariables params = model.named_parameters();
      BOOST_REQUIRE(tight.grads.size() == loose.grads.size());
      for (size_t i = 0; i < params.size(); ++i) {
        BOOST_TEST(max_abs_diff(loose.grads[i], tight.grads[i]) < 1e-12, params[i].first);
      }
      // Other pad ids (any token in range) change nothing either.
      const Run other = run(pad_to(kSrc, 5 + kExtra, 6), kSrcLengths, pad_to(kTgt, 4 + kExtra, 5), kTgtLengths,
                            targets_long);
      BOOST_TEST(std::abs(other.loss - tight.loss) < 1e-12);
      // Controls: a real token changes the loss, and so does padding the lengths say is real.
      Indices src_changed = src_long;
      src_changed.data[static_cast<size_t>(1 * 8 + 4)] = 3;  // row 1, last real source position
      BOOST_TEST(std::abs(run(src_changed, kSrcLengths, tgt_long, kTgtLengths, targets_long).loss - tight.loss) > 1e-6);
      Indices tgt_changed = tgt_long;
      tgt_changed.data[static_cast<size_t>(2 * 7 + 1)] = 3;  // row 2, last real target input
      BOOST_TEST(std::abs(run(src_long, kSrcLengths, tgt_changed, kTgtLengths, targets_long).loss - tight.loss) > 1e-6);
      BOOST_TEST(std::abs(run(src_long, {1 + kExtra, 5, 3}, tgt_long, kTgtLengths, targets_long).loss - tight.loss) >
                 1e-6);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(seq2seq_bad_input)

BOOST_AUTO_TEST_CASE(bad_ids_lengths_and_options_name_the_op_and_the_values) {
  Seq2Seq model(small_seq2seq(false));
  // A source longer than the positional table (max_len 8).
  const Indices long_src(Shape{1, 9}, std::vector<int64_t>(9, 1));
  AG_CHECK_THROWS_WITH(model(long_src, {9}, Indices(Shape{1, 2}, {1, 2}), {2}), std::invalid_argument,
                       "Seq2Seq::forward", "src", "(1, 9)", "max_len=8");
  AG_CHECK_THROWS_WITH(model.encode(long_src, {9}), std::invalid_argument, "Seq2Seq::encode", "max_len=8");
  // Tokens out of range, on either side.
  AG_CHECK_THROWS_WITH(model(kSrc, kSrcLengths, Indices(Shape{3, 1}, {1, 6, 0}), {1, 1, 1}), std::invalid_argument,
                       "Seq2Seq::forward", "tgt token 6", "(1, 0)", "vocab=6");
  AG_CHECK_THROWS_WITH(model(Indices(Shape{3, 1}, {1, 0, -1}), {1, 1, 1}, kTgt, kTgtLengths), std::invalid_argument,
                       "src token -1", "(2, 0)", "vocab=7");
  // Lengths: too few, zero, longer than the sequence.
  AG_CHECK_THROWS_WITH(model(kSrc, {1, 5}, kTgt, kTgtLengths), std::invalid_argument, "Seq2Seq::forward",
                       "src_lengths [1, 5]", "3 lengths", "[1, 5]");
  AG_CHECK_THROWS_WITH(model(kSrc, {1, 0, 3}, kTgt, kTgtLengths), std::invalid_argument, "src_lengths [1, 0, 3]");
  AG_CHECK_THROWS_WITH(model(kSrc, kSrcLengths, kTgt, {4, 5, 1}), std::invalid_argument, "tgt_lengths [4, 5, 1]",
                       "[1, 4]");
  AG_CHECK_THROWS_WITH(model(kSrc, kSrcLengths, Indices(Shape{2, 4}, std::vector<int64_t>(8, 1)), {4, 4}),
                       std::invalid_argument, "different batch sizes", "(3, 5)", "(2, 4)");
  // Options.
  Seq2SeqOptions o = small_seq2seq(false);
  o.share_embeddings = true;
  AG_CHECK_THROWS_WITH(Seq2Seq{o}, std::invalid_argument, "Seq2Seq", "share_embeddings", "src_vocab=7",
                       "tgt_vocab=6");
  o = small_seq2seq(false);
  o.n_head = 3;
  AG_CHECK_THROWS_WITH(Seq2Seq{o}, std::invalid_argument, "Seq2Seq", "n_head 3", "d_model 8");
  o = small_seq2seq(false);
  o.max_len = 0;
  AG_CHECK_THROWS_WITH(Seq2Seq{o}, std::invalid_argument, "Seq2Seq", "max_len", "got 0");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
