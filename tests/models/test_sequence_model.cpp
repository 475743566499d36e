// SequenceModel: shapes and parameter names, float64 gradient checks of every parameter and of
// the embedded input (pre- and post-norm, learned and sinusoidal positions, dropout, key
// padding with an empty sequence, a transposed input), options JSON and bad input.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <set>

#include "attograd/models/toy/sequence_model.h"
#include "support.h"

namespace ag::testing {
namespace {

SequenceModelOptions tiny_options(bool norm_first, PositionalKind positional, double dropout) {
  return {.vocab = 5, .max_len = 6, .d_model = 8, .n_head = 2, .d_ff = 12, .n_layers = 2, .norm_first = norm_first,
          .dropout = dropout, .positional = positional};
}

// ids: (2, 4), every token of the vocabulary present.
Indices tiny_ids() { return Indices(Shape{2, 4}, {0, 1, 2, 3, 4, 3, 2, 1}); }

// The key biases of every block: softmax ignores them, so their gradient is zero by design.
std::vector<Variable> key_biases(SequenceModel& model) {
  std::vector<Variable> out;
  for (const auto& [name, p] : model.named_parameters()) {
    if (name.find("attn.w_k.bias") != std::string::npos) out.push_back(p);
  }
  return out;
}

struct GradcheckCase {
  bool norm_first;
  PositionalKind positional;
  double dropout;
  bool masked;
};

std::ostream& operator<<(std::ostream& os, const GradcheckCase& c) {
  return os << (c.norm_first ? "pre-norm" : "post-norm") << "/" << positional_kind_name(c.positional) << "/dropout "
            << c.dropout << (c.masked ? "/masked" : "");
}

const GradcheckCase kCases[] = {
    {true, PositionalKind::learned, 0.0, false},
    {false, PositionalKind::learned, 0.0, false},
    {true, PositionalKind::sinusoidal, 0.0, true},
    {false, PositionalKind::learned, 0.25, true},
    {true, PositionalKind::learned, 0.25, false},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(sequence_model)

BOOST_AUTO_TEST_CASE(logits_have_one_row_per_position_and_the_vocabulary_as_classes) {
  manual_seed(1);
  SequenceModel model(tiny_options(true, PositionalKind::learned, 0.0));
  const Variable logits = model(tiny_ids());
  BOOST_TEST(logits.shape() == Shape({2, 4, 5}));
  BOOST_TEST(logits.dtype() == DType::f32);
  // A shorter sequence uses the first rows of the positional table.
  BOOST_TEST(model(Indices(Shape{3, 2}, {0, 1, 2, 3, 4, 0})).shape() == Shape({3, 2, 5}));
}

BOOST_AUTO_TEST_CASE(parameters_follow_the_pytorch_style_dotted_names) {
  manual_seed(1);
  SequenceModel learned(tiny_options(true, PositionalKind::learned, 0.0));
  std::set<std::string> names;
  for (const auto& [name, p] : learned.named_parameters()) names.insert(name);
  for (const char* expected : {"embed.weight", "pos.weight", "encoder.blocks.0.attn.w_q.weight",
                               "encoder.blocks.1.ff.linear2.bias", "encoder.norm.weight", "head.weight", "head.bias"}) {
    BOOST_TEST(names.count(expected) == 1u, expected);
  }
  // Embedding 5x8, positions 6x8, per block 4 projections (8x8 + 8), ff (8x12 + 12, 12x8 + 8),
  // two norms (2 x 16); the pre-norm encoder's final norm (16); the head 8x5 + 5.
  const int64_t block = 4 * (64 + 8) + (96 + 12) + (96 + 8) + 2 * 16;
  BOOST_TEST(learned.num_parameters() == 40 + 48 + 2 * block + 16 + 45);

  SequenceModel sinusoidal(tiny_options(false, PositionalKind::sinusoidal, 0.0));
  names.clear();
  for (const auto& [name, p] : sinusoidal.named_parameters()) names.insert(name);
  BOOST_TEST(names.count("pos.weight") == 0u);    // a fixed table: a buffer, not a parameter
  BOOST_TEST(names.count("encoder.norm.weight") == 0u);  // post-norm blocks end normalised
  bool has_table = false;
  for (const auto& [name, t] : sinusoidal.state_dict()) has_table = has_table || name == "pos.pe";
  BOOST_TEST(has_table);
  BOOST_TEST(sinusoidal.num_parameters() == 40 + 2 * block + 45);
}

BOOST_DATA_TEST_CASE(gradients_of_every_parameter_match_central_differences, boost::unit_test::data::make(kCases), c) {
  manual_seed(11);
  SequenceModel model(tiny_options(c.norm_first, c.positional, c.dropout));
  model.to(DType::f64);
  model.train();
  // The second sequence has no keys at all: its queries get nothing from attention.
  const AttentionMask mask = c.masked ? AttentionMask::key_padding({3, 0}, 4) : AttentionMask();
  const Indices ids = tiny_ids();
  GradcheckOptions options;
  options.params = model.parameters();
  options.zero_ok = key_biases(model);
  check_gradients([&](const std::vector<Variable>&) { return model(ids, mask); }, {}, options);
}

BOOST_AUTO_TEST_CASE(gradients_reach_a_transposed_embedded_input) {
  manual_seed(12);
  SequenceModel model(tiny_options(true, PositionalKind::learned, 0.0));
  model.to(DType::f64);
  // x is stored (B, d_model, T) and read through a transposed view: a non-contiguous input.
  const Variable x = randn_leaf({2, 8, 3}, 5, "x");
  GradcheckOptions options;
  for (const auto& [name, p] : model.named_parameters()) {
    if (name != "embed.weight") options.params.push_back(p);  // the token table is bypassed here
  }
  options.zero_ok = key_biases(model);
  check_gradients([&](const std::vector<Variable>& in) { return model.forward_embedded(transpose(in[0], 1, 2)); }, {x},
                  options);
}

BOOST_AUTO_TEST_CASE(dropout_is_active_in_training_and_off_in_eval) {
  manual_seed(3);
  SequenceModel model(tiny_options(true, PositionalKind::learned, 0.5));
  model.eval();
  const std::vector<double> a = model(tiny_ids()).value().to_vector();
  const std::vector<double> b = model(tiny_ids()).value().to_vector();
  BOOST_TEST(a == b);
  model.train();
  default_generator().set_step(1);
  const std::vector<double> c = model(tiny_ids()).value().to_vector();
  BOOST_TEST(a != c);
  // Replaying the step replays the masks.
  default_generator().set_step(1);
  BOOST_TEST(model(tiny_ids()).value().to_vector() == c);
}

BOOST_AUTO_TEST_CASE(bad_options_and_inputs_name_what_is_wrong) {
  SequenceModelOptions o = tiny_options(true, PositionalKind::learned, 0.0);
  o.n_head = 3;
  AG_CHECK_THROWS_WITH(SequenceModel{o}, std::invalid_argument, "SequenceModel", "n_head 3", "d_model 8");
  o = tiny_options(true, PositionalKind::learned, 0.0);
  o.vocab = 1;
  AG_CHECK_THROWS_WITH(SequenceModel{o}, std::invalid_argument, "vocab", "1");
  o = tiny_options(true, PositionalKind::learned, 1.0);
  AG_CHECK_THROWS_WITH(SequenceModel{o}, std::invalid_argument, "dropout");
  AG_CHECK_THROWS_WITH(parse_positional_kind("rotary"), std::invalid_argument, "rotary", "learned", "sinusoidal");

  manual_seed(1);
  SequenceModel model(tiny_options(true, PositionalKind::learned, 0.0));
  AG_CHECK_THROWS_WITH(model(Indices(Shape{1, 7}, std::vector<int64_t>(7, 0))), std::invalid_argument, "(1, 7)",
                       "max_len=6");
  AG_CHECK_THROWS_WITH(model(Indices(Shape{4}, {0, 1, 2, 3})), std::invalid_argument, "(4,)", "(B, T)");
  AG_CHECK_THROWS_WITH(model(Indices(Shape{1, 2}, {0, 5})), std::invalid_argument, "id 5", "[0, 5)");
  AG_CHECK_THROWS_WITH(model.forward_embedded(Variable(zeros({2, 3, 7}))), std::invalid_argument, "(2, 3, 7)",
                       "d_model=8");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
