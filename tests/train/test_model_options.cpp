// The options of models, tasks and the loop through the JSON a checkpoint stores (one field
// list per struct, read both ways), and bad JSON refused; the enums' names both ways.
#include "attograd/models/gpt/gpt_options.h"
#include "attograd/models/seq2seq/seq2seq_options.h"
#include "attograd/models/toy/sequence_options.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/trainer.h"
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

// The text is what checkpoints written so far hold, byte for byte: the key order, the number
// forms, tgt_vocab resolved, a seed past int64 as a decimal string.
BOOST_AUTO_TEST_CASE(the_stored_text_of_every_options_struct_is_pinned) {
  BOOST_TEST(sequence_model_options_to_json({.vocab = 11, .max_len = 9, .d_model = 24, .n_head = 3, .d_ff = 40,
                                             .n_layers = 3, .norm_first = false, .dropout = 0.125,
                                             .positional = PositionalKind::sinusoidal}) ==
             R"({"vocab":11,"max_len":9,"d_model":24,"n_head":3,"d_ff":40,"n_layers":3,"norm_first":false,)"
             R"("dropout":0.125,"positional":"sinusoidal"})");
  BOOST_TEST(gpt_options_to_json({.vocab = 65, .block_size = 32, .d_model = 48, .n_head = 4, .n_layers = 2,
                                  .dropout = 0.0, .bias = true}) ==
             R"({"vocab":65,"block_size":32,"d_model":48,"n_head":4,"n_layers":2,"dropout":0.0,"bias":true,)"
             R"("activation":"gelu","vocab_multiple":1})");
  Seq2SeqOptions s2s{.src_vocab = 13, .tgt_vocab = 0, .max_len = 10, .d_model = 32, .n_head = 4, .d_ff = 64,
                     .n_encoder_layers = 2, .n_decoder_layers = 1, .dropout = 0.1};
  BOOST_TEST(seq2seq_options_to_json(s2s) ==
             R"({"src_vocab":13,"tgt_vocab":13,"max_len":10,"d_model":32,"n_head":4,"d_ff":64,"n_encoder_layers":2,)"
             R"("n_decoder_layers":1,"dropout":0.1,"norm_first":false,"activation":"relu","positional":"sinusoidal",)"
             R"("share_embeddings":false,"tie_head":false,"scale_embeddings":true,"input_norm":false,"final_norm":true,)"
             R"("layer_norm_eps":1e-05,"attn_bias":true,"d_k":0,"d_v":0,"scale_logits":false})");
  BOOST_TEST(seq2seq_options_from_json(seq2seq_options_to_json(s2s)).tgt_vocab == 13);
  const SequenceTaskOptions task{.kind = SequenceTaskKind::shift, .vocab_size = 8, .seq_len = 6, .batch_size = 4,
                                 .shift = 2, .seed = 18446744073709551615ull, .eval_seed = 7};
  BOOST_TEST(sequence_task_options_to_json(task) ==
             R"({"task":"shift","vocab_size":8,"seq_len":6,"batch_size":4,"shift":2,"seed":"18446744073709551615",)"
             R"("eval_seed":7})");
  BOOST_TEST(sequence_task_options_from_json(sequence_task_options_to_json(task)).seed == 18446744073709551615ull);
  BOOST_TEST(seq2seq_task_options_to_json({.kind = Seq2SeqTaskKind::sort_var, .symbols = 5, .min_len = 1, .max_len = 4,
                                           .batch_size = 8, .seed = 3, .eval_seed = 4}) ==
             R"({"task":"sort-var","symbols":5,"min_len":1,"max_len":4,"batch_size":8,"seed":3,"eval_seed":4})");
  BOOST_TEST(trainer_options_to_json({.optimizer = OptimizerKind::adamw, .lr = 0.002, .min_lr = 0.0002,
                                      .weight_decay = 0.1, .momentum = 0.9, .warmup_steps = 30,
                                      .schedule = LrDecay::linear, .steps = 300, .clip_norm = 1.0}) ==
             R"({"optimizer":"adamw","lr":0.002,"min_lr":0.0002,"weight_decay":0.1,"momentum":0.9,"warmup_steps":30,)"
             R"("schedule":"linear","steps":300,"clip_norm":1.0,"beta1":0.9,"beta2":0.999,"decay":"all","grad_accum":1})");
  BOOST_TEST(loop_state_to_json({.step = 20, .window_loss_sum = 1.5, .window_steps = 3, .elapsed_s = 2.25,
                                 .first_loss = 2.75}) ==
             R"({"step":20,"window_loss_sum":1.5,"window_steps":3,"elapsed_s":2.25,"first_loss":2.75})");
}

BOOST_AUTO_TEST_CASE(every_field_is_required_with_its_type_and_named_when_wrong) {
  const std::string task = seq2seq_task_options_to_json({.kind = Seq2SeqTaskKind::dedup, .symbols = 5});
  std::string no_seed = task;
  no_seed.erase(no_seed.find(",\"seed\""), no_seed.find(",\"eval_seed\"") - no_seed.find(",\"seed\""));
  AG_CHECK_THROWS_WITH(seq2seq_task_options_from_json(no_seed), std::invalid_argument,
                       "seq2seq_task_options_from_json: ", "missing \"seed\"");
  std::string text_len = task;
  text_len.replace(text_len.find("\"min_len\":1"), 11, "\"min_len\":\"1\"");
  AG_CHECK_THROWS_WITH(seq2seq_task_options_from_json(text_len), std::invalid_argument,
                       "seq2seq_task_options_from_json: ", "\"min_len\" must be an integer", "\"1\"");
  std::string bad_kind = task;
  bad_kind.replace(bad_kind.find("dedup"), 5, "dedupe");
  AG_CHECK_THROWS_WITH(seq2seq_task_options_from_json(bad_kind), std::invalid_argument,
                       "seq2seq_task_options_from_json: unknown seq2seq task 'dedupe'", "sort-var or dedup");
  AG_CHECK_THROWS_WITH(trainer_options_from_json(R"({"optimizer":"adam","lr":true})"), std::invalid_argument,
                       "trainer_options_from_json: ", "\"lr\" must be a number, got true");
  AG_CHECK_THROWS_WITH(loop_state_from_json(R"({"step":1,"window_loss_sum":0,"window_steps":1,"elapsed_s":0})"),
                       std::invalid_argument, "missing \"first_loss\"");
  // What the struct's own validate() refuses is named with the parser in front.
  AG_CHECK_THROWS_WITH(sequence_task_options_from_json(sequence_task_options_to_json({.vocab_size = 1})),
                       std::invalid_argument, "sequence_task_options_from_json: task reverse: vocab_size must lie in");
}

// A field added to a stored struct later is marked kKeepIfAbsent: older documents without it
// read with the base's value; a present one is still checked.
BOOST_AUTO_TEST_CASE(a_field_added_later_keeps_its_default_when_absent) {
  struct Later {
    int64_t width = 0;
    double beta = 0.9;
    LrDecay decay = LrDecay::cosine;
  };
  constexpr auto fields = [](auto& o, auto&& field) {
    field("width", o.width), field("beta", o.beta, kKeepIfAbsent);
    field("decay", o.decay, lr_decay_name, parse_lr_decay, kKeepIfAbsent);
  };
  BOOST_TEST(fields_to_json(Later{.width = 3, .beta = 0.5, .decay = LrDecay::linear}, fields).dump() ==
             R"({"width":3,"beta":0.5,"decay":"linear"})");
  const Later old = fields_from_json(R"({"width":4})", fields, "later: ", Later{});
  BOOST_TEST(old.width == 4);
  BOOST_TEST(old.beta == 0.9);
  BOOST_TEST((old.decay == LrDecay::cosine));
  const Later now = fields_from_json(R"({"width":4,"beta":0.5,"decay":"linear"})", fields, "later: ", Later{});
  BOOST_TEST(now.beta == 0.5);
  BOOST_TEST((now.decay == LrDecay::linear));
  AG_CHECK_THROWS_WITH(fields_from_json(R"({"width":4,"beta":"x"})", fields, "later: ", Later{}), std::invalid_argument,
                       "later: \"beta\" must be a number");
  AG_CHECK_THROWS_WITH(fields_from_json(R"({"beta":0.5})", fields, "later: ", Later{}), std::invalid_argument,
                       "later: missing \"width\"");
}

// The "trainer" entry exactly as checkpoints stored it before the betas and the decayed set
// existed: it still reads, with the values those runs trained with, whatever the base (a
// resumed run's command line) says; the same text with the new fields reads them.
BOOST_AUTO_TEST_CASE(a_trainer_entry_from_before_the_betas_reads_with_the_old_defaults) {
  const std::string old = R"({"optimizer":"adamw","lr":0.002,"min_lr":0.0002,"weight_decay":0.1,"momentum":0.9,)"
                          R"("warmup_steps":30,"schedule":"linear","steps":300,"clip_norm":1.0})";
  const TrainerOptions base{.decay = DecayParams::matrices, .beta1 = 0.5, .beta2 = 0.5, .eval_every = 7};
  const TrainerOptions o = trainer_options_from_json(old, base);
  BOOST_TEST(o.beta1 == 0.9);
  BOOST_TEST(o.beta2 == 0.999);
  BOOST_TEST((o.decay == DecayParams::all));
  BOOST_TEST(o.weight_decay == 0.1);
  BOOST_TEST(o.eval_every == 7);  // what observes the run still comes from the base
  std::string now = old;
  now.insert(now.size() - 1, R"(,"beta1":0.8,"beta2":0.95,"decay":"matrices")");
  const TrainerOptions n = trainer_options_from_json(now, base);
  BOOST_TEST(n.beta1 == 0.8);
  BOOST_TEST(n.beta2 == 0.95);
  BOOST_TEST((n.decay == DecayParams::matrices));
  std::string bad = old;
  bad.insert(bad.size() - 1, R"(,"beta2":1)");
  AG_CHECK_THROWS_WITH(trainer_options_from_json(bad), std::invalid_argument, "trainer_options_from_json: ",
                       "beta2 must lie in [0, 1), got 1");
}

// Checkpoints written before the original Transformer's switches existed hold none of them: they
// read as the defaults, which build the model those checkpoints were trained with. The switches
// set as the seed's model sets them survive the round trip, and a bad value is still refused.
BOOST_AUTO_TEST_CASE(seq2seq_checkpoints_from_before_the_seed_switches_read_with_the_defaults) {
  const std::string before =
      R"({"src_vocab":13,"tgt_vocab":13,"max_len":10,"d_model":32,"n_head":4,"d_ff":64,"n_encoder_layers":2,)"
      R"("n_decoder_layers":1,"dropout":0.1,"norm_first":false,"activation":"relu","positional":"sinusoidal",)"
      R"("share_embeddings":false,"tie_head":false,"scale_embeddings":true})";
  const Seq2SeqOptions old = seq2seq_options_from_json(before);
  const Seq2SeqOptions defaults;
  BOOST_TEST(old.input_norm == defaults.input_norm);
  BOOST_TEST(old.final_norm == defaults.final_norm);
  BOOST_TEST(old.layer_norm_eps == defaults.layer_norm_eps);
  BOOST_TEST(old.attn_bias == defaults.attn_bias);
  BOOST_TEST(old.d_k == defaults.d_k);
  BOOST_TEST(old.d_v == defaults.d_v);
  BOOST_TEST(old.scale_logits == defaults.scale_logits);
  BOOST_TEST(old.d_model == 32);

  Seq2SeqOptions seed = old;
  seed.input_norm = true, seed.final_norm = false, seed.layer_norm_eps = 1e-6, seed.attn_bias = false;
  seed.d_k = 16, seed.d_v = 8, seed.scale_logits = true;
  const Seq2SeqOptions back = seq2seq_options_from_json(seq2seq_options_to_json(seed));
  BOOST_TEST(back.input_norm);
  BOOST_TEST(!back.final_norm);
  BOOST_TEST(back.layer_norm_eps == 1e-6);
  BOOST_TEST(!back.attn_bias);
  BOOST_TEST(back.d_k == 16);
  BOOST_TEST(back.d_v == 8);
  BOOST_TEST(back.scale_logits);
  BOOST_TEST(seq2seq_options_to_json(back) == seq2seq_options_to_json(seed));

  std::string bad = seq2seq_options_to_json(seed);
  bad.replace(bad.find("\"layer_norm_eps\":1e-06"), 22, "\"layer_norm_eps\":0");
  AG_CHECK_THROWS_WITH(seq2seq_options_from_json(bad), std::invalid_argument, "seq2seq_options_from_json: ",
                       "layer_norm_eps must lie in (0, 1], got 0");
  std::string text_dk = seq2seq_options_to_json(seed);
  text_dk.replace(text_dk.find("\"d_k\":16"), 8, "\"d_k\":\"16\"");
  AG_CHECK_THROWS_WITH(seq2seq_options_from_json(text_dk), std::invalid_argument, "\"d_k\" must be an integer");
}

// GPT checkpoints written before GPT-2's options hold neither: they read as the exact GELU and
// an unpadded table, the model they were trained with. Set, both survive the round trip, and a
// bad value is refused by name.
BOOST_AUTO_TEST_CASE(gpt_checkpoints_from_before_gpt2s_options_read_with_the_defaults) {
  const std::string before = R"({"vocab":65,"block_size":32,"d_model":48,"n_head":4,"n_layers":2,"dropout":0.0,"bias":true})";
  const GPTOptions old = gpt_options_from_json(before);
  BOOST_TEST((old.activation == Activation::gelu));
  BOOST_TEST(old.vocab_multiple == 1);
  BOOST_TEST(padded_vocab(old) == 65);
  GPTOptions gpt2 = old;
  gpt2.activation = Activation::gelu_tanh;
  gpt2.vocab_multiple = 64;
  const GPTOptions back = gpt_options_from_json(gpt_options_to_json(gpt2));
  BOOST_TEST((back.activation == Activation::gelu_tanh));
  BOOST_TEST(back.vocab_multiple == 64);
  BOOST_TEST(padded_vocab(back) == 128);
  std::string bad = gpt_options_to_json(gpt2);
  bad.replace(bad.find("\"vocab_multiple\":64"), 19, "\"vocab_multiple\":0");
  AG_CHECK_THROWS_WITH(gpt_options_from_json(bad), std::invalid_argument, "vocab_multiple must lie in [1, 65536], got 0");
  std::string bad_act = gpt_options_to_json(gpt2);
  bad_act.replace(bad_act.find("\"gelu_tanh\""), 11, "\"swish\"");
  AG_CHECK_THROWS_WITH(gpt_options_from_json(bad_act), std::invalid_argument, "swish");
}

// Every value of every enum a checkpoint or a flag names reads back from its name; a name that
// is not one lists the choices.
BOOST_AUTO_TEST_CASE(every_enum_name_reads_back_as_its_value) {
  const auto round_trips = [](auto values, auto name_of_value, auto parse) {
    for (const auto v : values) {
      const std::string name = name_of_value(v);
      BOOST_TEST(name != "?");
      BOOST_TEST((parse(name) == v), name);
    }
  };
  using O = OptimizerKind;
  round_trips(std::vector{O::sgd, O::adam, O::adamw}, optimizer_kind_name, parse_optimizer_kind);
  round_trips(std::vector{LrDecay::constant, LrDecay::cosine, LrDecay::linear}, lr_decay_name, parse_lr_decay);
  round_trips(std::vector{DecayParams::all, DecayParams::matrices}, decay_params_name, parse_decay_params);
  using S = SequenceTaskKind;
  round_trips(std::vector{S::copy, S::reverse, S::sort, S::shift}, sequence_task_name, parse_sequence_task_kind);
  using T = Seq2SeqTaskKind;
  round_trips(std::vector{T::addition, T::reverse_var, T::sort_var, T::dedup}, seq2seq_task_name,
              parse_seq2seq_task_kind);
  round_trips(std::vector{PositionalKind::learned, PositionalKind::sinusoidal}, positional_kind_name,
              parse_positional_kind);
  round_trips(std::vector{Activation::relu, Activation::gelu, Activation::gelu_tanh}, activation_name, parse_activation);
  const std::vector<std::string> dtypes{"F32", "F64", "I64"};
  for (const auto d : {SafetensorsDType::F32, SafetensorsDType::F64, SafetensorsDType::I64}) {
    BOOST_TEST(safetensors_dtype_name(d) == dtypes[static_cast<size_t>(d)]);
  }
  AG_CHECK_THROWS_WITH(parse_optimizer_kind("adam_w"), std::invalid_argument,
                       "unknown optimizer 'adam_w' (choose sgd, adam or adamw)");
  AG_CHECK_THROWS_WITH(parse_lr_decay(""), std::invalid_argument, "(choose constant, cosine or linear)");
}

}  // namespace
}  // namespace ag::testing
