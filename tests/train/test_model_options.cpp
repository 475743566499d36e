// A SequenceModel's options through the JSON a checkpoint stores, and bad JSON refused.
#include "attograd/train/io/model_options.h"
#include "support.h"

namespace ag::testing {
namespace {

BOOST_AUTO_TEST_CASE(options_round_trip_through_json) {
  const SequenceModelOptions o = {.vocab = 11, .max_len = 9, .d_model = 24, .n_head = 3, .d_ff = 40, .n_layers = 3,
                                  .norm_first = false, .dropout = 0.125, .positional = PositionalKind::sinusoidal};
  const SequenceModelOptions back = sequence_model_options_from_json(sequence_model_options_to_json(o));
  BOOST_TEST(sequence_model_options_to_json(back) == sequence_model_options_to_json(o));
  BOOST_TEST(back.d_ff == 40);
  BOOST_TEST(back.dropout == 0.125);
  BOOST_TEST(!back.norm_first);
  BOOST_TEST((back.positional == PositionalKind::sinusoidal));

  std::string json = sequence_model_options_to_json(o);
  AG_CHECK_THROWS_WITH(sequence_model_options_from_json(json.substr(0, json.size() - 1)), std::invalid_argument,
                       "sequence_model_options_from_json");
  AG_CHECK_THROWS_WITH(sequence_model_options_from_json(R"({"vocab":4})"), std::invalid_argument, "missing");
  std::string extra = json;
  extra.insert(1, R"("colour":"red",)");
  AG_CHECK_THROWS_WITH(sequence_model_options_from_json(extra), std::invalid_argument, "unknown field", "colour");
  std::string bad_heads = json;
  bad_heads.replace(bad_heads.find("\"n_head\":3"), 10, "\"n_head\":5");
  AG_CHECK_THROWS_WITH(sequence_model_options_from_json(bad_heads), std::invalid_argument, "n_head 5", "d_model 24");
}

}  // namespace
}  // namespace ag::testing
