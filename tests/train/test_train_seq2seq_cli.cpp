// The command line of tools/train_seq2seq (CLI11): the defaults are the README's reverse-var
// run, the model's sizes follow the task, every flag reaches its option, bad values and
// contradictions are refused naming the flag and the value, --resume refuses the flags the
// checkpoint decides, and the written configuration reads back to the same run.
#include <fstream>

#include "attograd/models/seq2seq/seq2seq_options.h"
#include "tools/train_seq2seq_cli.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {

TrainSeq2SeqArgs parse(std::initializer_list<const char*> args) {
  return parse_training_args<TrainSeq2SeqArgs>(std::vector<std::string>(args.begin(), args.end()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(train_seq2seq_args)

BOOST_AUTO_TEST_CASE(the_defaults_are_the_readme_run_and_the_model_follows_the_task) {
  const TrainSeq2SeqArgs a = parse({});
  BOOST_TEST((a.task.kind == Seq2SeqTaskKind::reverse_var));
  BOOST_TEST(a.model.src_vocab == 13);  // pad, bos, eos and 10 symbols
  BOOST_TEST(a.model.tgt_vocab == 13);
  BOOST_TEST(a.model.max_len == 9);  // 8 symbols and eos
  BOOST_TEST(!a.model.norm_first);   // post-norm, as the paper
  BOOST_TEST(a.beam == 1);
  BOOST_TEST(a.trainer.target_seq_acc == 0.99);
  BOOST_TEST(a.trainer.threads == usable_cores());
  const TrainSeq2SeqArgs add = parse({"--task", "addition"});
  BOOST_TEST(add.model.src_vocab == 14);  // ten digits and '+'
  BOOST_TEST(add.model.max_len == 17);    // 8 digits + 8 digits
}

BOOST_AUTO_TEST_CASE(every_flag_reaches_its_option) {
  const TrainSeq2SeqArgs a =
      parse({"--task", "dedup", "--symbols", "6", "--min-len", "2", "--max-len", "9", "--d-model", "48", "--heads",
             "3", "--d-ff", "96", "--encoder-layers", "3", "--decoder-layers", "1", "--pre-norm", "--positional",
             "learned", "--activation", "gelu", "--dropout", "0.1", "--share-embeddings", "--tie-head", "--optimizer",
             "adamw", "--lr", "2e-3", "--min-lr", "1e-5", "--weight-decay", "0.01", "--warmup", "50", "--schedule",
             "linear", "--clip", "0.5", "--steps", "900", "--batch", "32", "--seed", "7", "--eval-every", "25",
             "--eval-sequences", "100", "--target-acc", "0.9", "--beam", "5", "--length-penalty", "1.0", "--threads",
             "1", "--save", "a.st", "--log", "a.jsonl", "--plot", "a.svg", "--overwrite", "--quiet"});
  BOOST_TEST((a.task.kind == Seq2SeqTaskKind::dedup));
  BOOST_TEST(a.task.symbols == 6);
  BOOST_TEST(a.task.min_len == 2);
  BOOST_TEST(a.task.max_len == 9);
  BOOST_TEST(a.task.batch_size == 32);
  BOOST_TEST(a.task.seed == 7u);
  BOOST_TEST(a.model.d_model == 48);
  BOOST_TEST(a.model.n_head == 3);
  BOOST_TEST(a.model.d_ff == 96);
  BOOST_TEST(a.model.n_encoder_layers == 3);
  BOOST_TEST(a.model.n_decoder_layers == 1);
  BOOST_TEST(a.model.norm_first);
  BOOST_TEST((a.model.positional == PositionalKind::learned));
  BOOST_TEST((a.model.activation == Activation::gelu));
  BOOST_TEST(a.model.dropout == 0.1);
  BOOST_TEST(a.model.share_embeddings);
  BOOST_TEST(a.model.tie_head);
  BOOST_TEST(a.model.max_len == 10);
  BOOST_TEST((a.trainer.optimizer == OptimizerKind::adamw));
  BOOST_TEST(a.trainer.lr == 2e-3);
  BOOST_TEST(a.trainer.min_lr == 1e-5);
  BOOST_TEST(a.trainer.weight_decay == 0.01);
  BOOST_TEST(a.trainer.warmup_steps == 50);
  BOOST_TEST((a.trainer.schedule == LrDecay::linear));
  BOOST_TEST(a.trainer.clip_norm == 0.5);
  BOOST_TEST(a.trainer.steps == 900);
  BOOST_TEST(a.trainer.eval_every == 25);
  BOOST_TEST(a.eval_sequences == 100);
  BOOST_TEST(a.trainer.target_seq_acc == 0.9);
  BOOST_TEST(a.trainer.threads == 1);
  BOOST_TEST(a.beam == 5);
  BOOST_TEST(a.length_penalty == 1.0);
  BOOST_TEST(a.save_path == "a.st");
  BOOST_TEST(a.log_path == "a.jsonl");
  BOOST_TEST(a.plot_path == "a.svg");
  BOOST_TEST(a.overwrite);
  BOOST_TEST(a.quiet);
}

// The seed's model from the command line: every switch reaches its option, and without them
// the model keeps nn.Transformer's defaults.
BOOST_AUTO_TEST_CASE(the_seed_model_flags_reach_their_options) {
  const TrainSeq2SeqArgs a =
      parse({"--input-norm", "--no-final-norm", "--layer-norm-eps", "1e-6", "--no-attn-bias", "--d-k", "12", "--d-v",
             "20", "--no-scale-embeddings", "--scale-logits", "--share-embeddings", "--tie-head"});
  BOOST_TEST(a.model.input_norm);
  BOOST_TEST(!a.model.final_norm);
  BOOST_TEST(a.model.layer_norm_eps == 1e-6);
  BOOST_TEST(!a.model.attn_bias);
  BOOST_TEST(a.model.d_k == 12);
  BOOST_TEST(a.model.d_v == 20);
  BOOST_TEST(!a.model.scale_embeddings);
  BOOST_TEST(a.model.scale_logits);
  const Seq2SeqOptions defaults;
  const TrainSeq2SeqArgs plain = parse({});
  BOOST_TEST(plain.model.input_norm == defaults.input_norm);
  BOOST_TEST(plain.model.final_norm == defaults.final_norm);
  BOOST_TEST(plain.model.layer_norm_eps == defaults.layer_norm_eps);
  BOOST_TEST(plain.model.attn_bias == defaults.attn_bias);
  BOOST_TEST(plain.model.d_k == defaults.d_k);
  BOOST_TEST(plain.model.d_v == defaults.d_v);
  BOOST_TEST(plain.model.scale_embeddings == defaults.scale_embeddings);
  BOOST_TEST(plain.model.scale_logits == defaults.scale_logits);
  AG_CHECK_THROWS_WITH(parse({"--layer-norm-eps", "0"}), UsageError, "layer_norm_eps", "got 0");
  AG_CHECK_THROWS_WITH(parse({"--d-k", "-2"}), UsageError, "--d-k", "-2");
}

BOOST_AUTO_TEST_CASE(bad_values_name_the_flag_and_the_value) {
  AG_CHECK_THROWS_WITH(parse({"--task", "copy"}), UsageError, "--task", "copy");
  AG_CHECK_THROWS_WITH(parse({"--beam", "0"}), UsageError, "--beam", "0");
  AG_CHECK_THROWS_WITH(parse({"--length-penalty", "-1"}), UsageError, "--length-penalty", "-1");
  AG_CHECK_THROWS_WITH(parse({"--encoder-layers", "0"}), UsageError, "--encoder-layers", "0");
  AG_CHECK_THROWS_WITH(parse({"--min-len", "5", "--max-len", "3"}), UsageError, "--min-len", "5", "--max-len 3");
  AG_CHECK_THROWS_WITH(parse({"--task", "addition", "--max-len", "19"}), UsageError, "--max-len", "19", "18");
  AG_CHECK_THROWS_WITH(parse({"--task", "addition", "--symbols", "5"}), UsageError, "--symbols", "addition");
  AG_CHECK_THROWS_WITH(parse({"--heads", "3"}), UsageError, "--heads", "3", "--d-model 64");
  AG_CHECK_THROWS_WITH(parse({"--lr", "nan"}), UsageError, "--lr", "nan");
  AG_CHECK_THROWS_WITH(parse({"--warmup", "5000", "--steps", "100"}), UsageError, "--warmup", "5000", "--steps 100");
  AG_CHECK_THROWS_WITH(parse({"--pre-norm", "--post-norm"}), UsageError, "--pre-norm", "--post-norm");
  AG_CHECK_THROWS_WITH(parse({"--activation", "tanh"}), UsageError, "--activation", "tanh");
  AG_CHECK_THROWS_WITH(parse({"--save", ""}), UsageError, "--save");
  AG_CHECK_THROWS_WITH(parse({"--colour", "red"}), UsageError, "unknown flag", "--colour");
}

BOOST_AUTO_TEST_CASE(resume_refuses_the_flags_the_checkpoint_decides) {
  const TrainSeq2SeqArgs a = parse({"--resume", "runs/dedup/ckpt.safetensors", "--eval-every", "10", "--beam", "4"});
  BOOST_TEST(a.resume_path == "runs/dedup/ckpt.safetensors");
  BOOST_TEST(a.trainer.eval_every == 10);
  BOOST_TEST(a.beam == 4);
  for (const char* flag : {"--task", "--d-model", "--lr", "--seed", "--max-len", "--tie-head", "--d-k",
                           "--no-final-norm"}) {
    std::vector<std::string> args = {"--resume", "c.st", flag};
    const bool switch_flag = flag == std::string("--tie-head") || flag == std::string("--no-final-norm");
    if (!switch_flag) args.push_back(flag == std::string("--task") ? "dedup" : "2");
    AG_CHECK_THROWS_WITH(parse_training_args<TrainSeq2SeqArgs>(args), UsageError, flag, "--resume");
  }
}

BOOST_AUTO_TEST_CASE(the_written_configuration_reads_back_to_the_same_options) {
  TempDir dir;
  const TrainSeq2SeqArgs a = parse_training_args<TrainSeq2SeqArgs>({"--task", "addition", "--max-len", "4", "--d-model", "32",
                                                       "--lr", "0.0012345678901234567", "--seed",
                                                       "18446744073709551615", "--steps", "123", "--tie-head",
                                                       "--input-norm", "--no-final-norm", "--layer-norm-eps",
                                                       "1e-6", "--d-v", "12", "--scale-logits",
                                                       "--write-config", dir.file("s2s.toml")});
  BOOST_TEST(a.config_text.rfind("# attograd configuration (run it with train_seq2seq --config FILE)", 0) == 0);
  std::ofstream(dir.file("s2s.toml")) << a.config_text;
  const TrainSeq2SeqArgs b = parse_training_args<TrainSeq2SeqArgs>({"--config", dir.file("s2s.toml")});
  BOOST_TEST(seq2seq_options_to_json(b.model) == seq2seq_options_to_json(a.model));
  BOOST_TEST(seq2seq_task_options_to_json(b.task) == seq2seq_task_options_to_json(a.task));
  BOOST_TEST(trainer_options_to_json(b.trainer) == trainer_options_to_json(a.trainer));
  BOOST_TEST(b.seed == a.seed);
  BOOST_TEST(b.config_text == a.config_text);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
