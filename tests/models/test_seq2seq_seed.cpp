// Seq2Seq with the seed's options (models/seq2seq/seq2seq.h): the parameters they make and leave out,
// each switch doing what it says (input norms after the positions, eps, no final norms, logits
// scaled by d_model^-1/2), f64 gradient checks of the new paths on ids, embedded inputs and every
// parameter, and bad values refused by name. The cached decoder with the seed's switches is
// checked beside the others in test_seq2seq_decode.cpp.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "models_support.h"

namespace ag::testing {

namespace {

// The seed's model, small: one table for both sides looked up unscaled, sinusoidal positions,
// a LayerNorm on each stack's input and none after, eps 1e-6, attention without bias and with
// heads of d_k 3 and d_v 5, a tied head whose logits are scaled by d_model^-1/2.
Seq2SeqOptions seed_seq2seq() {
  return {.src_vocab = 7, .tgt_vocab = 7, .max_len = 8, .d_model = 8, .n_head = 2, .d_ff = 12,
          .n_encoder_layers = 1, .n_decoder_layers = 2, .dropout = 0.1, .norm_first = false,
          .positional = PositionalKind::sinusoidal, .share_embeddings = true, .tie_head = true,
          .scale_embeddings = false, .input_norm = true, .final_norm = false, .layer_norm_eps = 1e-6,
          .attn_bias = false, .d_k = 3, .d_v = 5, .scale_logits = true};
}

// The same switches in other company: pre-norm layers between input norms and final norms, three
// heads (which do not divide d_model) of d_k 4 and d_v 2, two tables, an untied head with bias
// whose logits are scaled, learned positions.
Seq2SeqOptions mixed_seq2seq() {
  return {.src_vocab = 7, .tgt_vocab = 6, .max_len = 8, .d_model = 8, .n_head = 3, .d_ff = 12,
          .n_encoder_layers = 1, .n_decoder_layers = 1, .dropout = 0.1, .norm_first = true,
          .positional = PositionalKind::learned, .input_norm = true, .final_norm = true, .layer_norm_eps = 1e-3,
          .attn_bias = false, .d_k = 4, .d_v = 2, .scale_logits = true};
}

// (B, S) source with lengths {1, 5, 3}, (B, T) target with lengths {4, 1, 2}; padding holds 0.
const Indices kSrc(Shape{3, 5}, {4, 0, 0, 0, 0, 1, 2, 3, 6, 5, 2, 2, 1, 0, 0});
const std::vector<int64_t> kSrcLengths = {1, 5, 3};
const Indices kTgt(Shape{3, 4}, {1, 3, 5, 2, 1, 0, 0, 0, 1, 4, 0, 0});
const std::vector<int64_t> kTgtLengths = {4, 1, 2};

std::vector<std::string> parameter_names(const Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, p] : m.named_parameters()) names.push_back(name);
  return names;
}

Variable parameter(const Module& m, const std::string& name) {
  for (const auto& [n, p] : m.named_parameters()) {
    if (n == name) return p;
  }
  BOOST_FAIL("no parameter " << name);
  return {};
}

// Every LayerNorm in the module tree.
void layer_norms(const Module& m, std::vector<const LayerNorm*>& out) {
  if (const auto* norm = dynamic_cast<const LayerNorm*>(&m)) out.push_back(norm);
  for (const auto& [name, child] : m.named_children()) layer_norms(*child, out);
}

GradcheckOptions every_parameter(Seq2Seq& m, const std::vector<Variable>& zero_ok = {}) {
  m.to(DType::f64);
  GradcheckOptions o;
  for (const Variable& p : m.parameters()) o.params.push_back(p);
  o.zero_ok = zero_ok;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(seq2seq_seed_options)

BOOST_AUTO_TEST_CASE(the_seed_options_add_input_norms_and_drop_final_norms_and_biases) {
  manual_seed(120);
  Seq2Seq model(seed_seq2seq());
  const std::vector<std::string> names = parameter_names(model);
  const auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  // The input norms come after the table (the positions are a buffer) and before the stacks.
  BOOST_TEST(names.at(0) == "embed.weight");
  BOOST_TEST(names.at(1) == "src_norm.weight");
  BOOST_TEST(names.at(2) == "src_norm.bias");
  BOOST_TEST(names.at(3) == "tgt_norm.weight");
  BOOST_TEST(names.at(4) == "tgt_norm.bias");
  BOOST_TEST(names.at(5) == "encoder.blocks.0.attn.w_q.weight");
  BOOST_TEST(!has("encoder.norm.weight"));
  BOOST_TEST(!has("decoder.norm.weight"));
  BOOST_TEST(!model.encoder().has_norm());
  BOOST_TEST(!model.decoder().has_norm());
  BOOST_TEST(!has("head.weight"));
  for (const std::string& n : names) {
    BOOST_TEST(!(n.find("attn.w_") != std::string::npos && n.ends_with(".bias")), n);
  }
  BOOST_TEST(has("decoder.layers.1.ff.linear1.bias"));  // the feed-forward keeps its bias
  // Heads of 3 (queries, keys) and 5 (values): the projections' shapes.
  MultiHeadAttention& self = model.encoder().block(0).attn();
  BOOST_TEST(self.w_q().weight().shape() == (Shape{6, 8}));
  BOOST_TEST(self.w_k().weight().shape() == (Shape{6, 8}));
  BOOST_TEST(self.w_v().weight().shape() == (Shape{10, 8}));
  BOOST_TEST(self.w_o().weight().shape() == (Shape{8, 10}));
  BOOST_TEST(model.decoder().layer(1).multihead_attn().w_v().weight().shape() == (Shape{10, 8}));
  // Every LayerNorm has the model's eps: two input norms, 2 in the encoder block, 3 in each decoder layer.
  std::vector<const LayerNorm*> norms;
  layer_norms(model, norms);
  BOOST_TEST(norms.size() == 10u);
  for (const LayerNorm* n : norms) BOOST_TEST(n->options().eps == 1e-6);

  // The defaults make none of them.
  Seq2SeqOptions plain = seed_seq2seq();
  plain.input_norm = false;
  plain.final_norm = true;
  plain.attn_bias = true;
  plain.d_k = plain.d_v = 0;
  Seq2Seq defaults(plain);
  const std::vector<std::string> plain_names = parameter_names(defaults);
  BOOST_TEST(plain_names.at(1) == "encoder.blocks.0.attn.w_q.weight");
  BOOST_TEST(defaults.encoder().has_norm());
  BOOST_TEST(defaults.encoder().block(0).attn().w_v().weight().shape() == (Shape{8, 8}));
  BOOST_TEST(names.size() == plain_names.size() + 4 - 4 - 5 * 4);  // input norms, final norms, 5 attentions' biases
}

// The model's logits from its pieces, by hand: each side's lookup plus positions, then its
// LayerNorm with eps 1e-6 (before the stack), the stacks with no norm after them, the tied head
// and the 1/sqrt(d_model) factor. A model that put the norm elsewhere, kept a final norm, used
// another eps or forgot the factor would differ by far more than rounding.
BOOST_AUTO_TEST_CASE(the_seed_model_is_its_pieces_in_the_seeds_order) {
  manual_seed(121);
  Seq2Seq model(seed_seq2seq());
  model.to(DType::f64);
  model.eval();
  const Tensor y = model(kSrc, kSrcLengths, kTgt, kTgtLengths).value();

  Tensor pe;
  for (const auto& [name, t] : model.state_dict()) {
    if (name == "pos.pe") pe = t;
  }
  BOOST_REQUIRE(pe.defined());
  const auto embedded = [&](const Indices& ids, const char* norm) {
    const Variable x = model.src_embed()(ids) + Variable(pe.narrow(0, 0, ids.shape[1]));  // unscaled lookup
    return layer_norm(x, parameter(model, std::string(norm) + ".weight"), parameter(model, std::string(norm) + ".bias"),
                      1, 1e-6);
  };
  const Variable memory = model.encoder()(embedded(kSrc, "src_norm"), AttentionMask::key_padding(kSrcLengths, 5));
  BOOST_TEST(max_abs_diff(model.encode(kSrc, kSrcLengths).value(), memory.value()) < 1e-12);
  const Variable h = model.decoder()(embedded(kTgt, "tgt_norm"), memory,
                                     AttentionMask::causal(4) & AttentionMask::key_padding(kTgtLengths, 4),
                                     AttentionMask::key_padding(kSrcLengths, 5));
  const Variable by_hand = linear(h, model.src_embed().weight()) * (1.0 / std::sqrt(8.0));
  BOOST_TEST(max_abs_diff(y, by_hand.value()) < 1e-12);

  // scale_logits alone: the same draws give the same logits times sqrt(d_model).
  Seq2SeqOptions unscaled = seed_seq2seq();
  unscaled.scale_logits = false;
  manual_seed(121);
  Seq2Seq plain(unscaled);
  plain.to(DType::f64);
  plain.eval();
  const Variable z = plain(kSrc, kSrcLengths, kTgt, kTgtLengths);
  BOOST_TEST(max_abs_diff((z * (1.0 / std::sqrt(8.0))).value(), y) < 1e-12);
  BOOST_TEST(max_abs_diff(z.value(), y) > 1e-3);
}

// Logits of every position against every parameter (the input norms, the unbiased projections of
// d_k != d_v, the tied or untied head under the logit scale), from ids with padding on both sides;
// then the embedded inputs of both sides too. The seed's model in eval with dropout set, the
// mixed one in training with dropout active.
BOOST_AUTO_TEST_CASE(gradcheck_the_seed_switches_on_ids_embedded_inputs_and_every_parameter) {
  for (const bool seed : {true, false}) {
    BOOST_TEST_CONTEXT((seed ? "seed" : "mixed")) {
      manual_seed(122);
      Seq2Seq model(seed ? seed_seq2seq() : mixed_seq2seq());
      model.train(!seed);
      check_gradients([&](const std::vector<Variable>&) { return model(kSrc, kSrcLengths, kTgt, kTgtLengths); }, {},
                      every_parameter(model));
      // Without a lookup, untied tables take no part; a tied one still makes the logits.
      std::vector<Variable> unused;
      if (!seed) unused = {model.src_embed().weight(), model.tgt_embed().weight()};
      const Variable src = randn_leaf({3, 5, 8}, 123, "src_x"), tgt = randn_leaf({3, 4, 8}, 124, "tgt_x");
      check_gradients(
          [&](const std::vector<Variable>& in) { return model.forward_embedded(in[0], kSrcLengths, in[1], kTgtLengths); },
          {src, tgt}, every_parameter(model, unused));
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_switches_name_the_option_and_the_value) {
  Seq2SeqOptions o = seed_seq2seq();
  o.d_k = -1;
  AG_CHECK_THROWS_WITH(Seq2Seq{o}, std::invalid_argument, "Seq2Seq", "d_k", "got -1");
  o = seed_seq2seq();
  o.d_v = Seq2SeqLimits::d_model + 1;
  AG_CHECK_THROWS_WITH(Seq2Seq{o}, std::invalid_argument, "Seq2Seq", "d_v", std::to_string(o.d_v));
  for (const double eps : {0.0, -1e-6, 2.0, std::numeric_limits<double>::quiet_NaN()}) {
    o = seed_seq2seq();
    o.layer_norm_eps = eps;
    AG_CHECK_THROWS_WITH(Seq2Seq{o}, std::invalid_argument, "Seq2Seq", "layer_norm_eps", "(0, 1]");
  }
  // Three heads of 8 need both head sizes given; with both the model builds.
  o = seed_seq2seq();
  o.n_head = 3;
  o.d_v = 0;
  AG_CHECK_THROWS_WITH(Seq2Seq{o}, std::invalid_argument, "Seq2Seq", "n_head 3", "d_model 8", "d_k and d_v");
  o.d_v = 2;
  BOOST_CHECK_NO_THROW(Seq2Seq{o});
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
