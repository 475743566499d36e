// The command line of tools/train_sequence (CLI11): defaults, every flag reaching its option,
// both value spellings, bad input (unknown flags, missing or malformed values, out-of-range
// numbers, contradictions) rejected with a message that names the flag, and TOML config files:
// bad keys, types and values named with the file, key and line, flags overriding the file, and
// the written configuration reading back to the same options.
#include <sys/stat.h>

#include "attograd/models/toy/sequence_job.h"
#include "attograd/models/toy/sequence_options.h"
#include "tools/train_sequence_cli.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {

TrainSequenceArgs parse(std::initializer_list<const char*> args) {
  return parse_training_args<TrainSequenceArgs>(std::vector<std::string>(args.begin(), args.end()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(train_sequence_args)

BOOST_AUTO_TEST_CASE(the_defaults_are_the_readme_run) {
  const TrainSequenceArgs a = parse({});
  BOOST_TEST((a.task.kind == SequenceTaskKind::reverse));
  BOOST_TEST(a.task.seq_len == 16);
  BOOST_TEST(a.task.vocab_size == 16);
  BOOST_TEST(a.model.vocab == 16);
  BOOST_TEST(a.model.max_len == 16);
  BOOST_TEST(a.trainer.target_seq_acc == 0.99);
  BOOST_TEST(a.trainer.threads == usable_cores());  // --threads auto
  BOOST_TEST(a.model.d_model == 64);
  BOOST_TEST(a.model.n_layers == 2);
  BOOST_TEST(a.model.norm_first);
  BOOST_TEST((a.trainer.optimizer == OptimizerKind::adam));
  BOOST_TEST(a.trainer.warmup_steps < a.trainer.steps);
  BOOST_TEST(a.usage.empty());  // neither --help nor --version: a run
  BOOST_TEST(!a.quiet);
  BOOST_TEST(a.save_path.empty());
  BOOST_TEST(a.log_path.empty());  // the run fills in runs/train_sequence/<task>/<n>/...
}

BOOST_AUTO_TEST_CASE(every_flag_reaches_its_option) {
  const TrainSequenceArgs a =
      parse({"--task", "shift", "--shift-k", "3", "--vocab", "12", "--length=10", "--d-model", "48", "--heads", "6",
             "--d-ff", "96", "--layers", "3", "--post-norm", "--positional", "sinusoidal", "--dropout", "0.1",
             "--optimizer", "adamw", "--lr", "2e-3", "--min-lr", "1e-4", "--weight-decay", "0.02", "--momentum", "0.8",
             "--warmup", "50", "--schedule", "linear", "--clip", "0.5", "--steps", "900", "--batch", "48",
             "--eval-every", "30", "--eval-sequences", "1000", "--target-acc", "0.95", "--seed", "18446744073709551615",
             "--threads", "2", "--save", "a.safetensors", "--log", "m.jsonl", "--plot", "p.svg", "--quiet"});
  BOOST_TEST((a.task.kind == SequenceTaskKind::shift));
  BOOST_TEST(a.task.shift == 3);
  BOOST_TEST(a.task.vocab_size == 12);
  BOOST_TEST(a.task.seq_len == 10);
  BOOST_TEST(a.task.batch_size == 48);
  BOOST_TEST(a.task.seed == 18446744073709551615ull);
  BOOST_TEST(a.seed == 18446744073709551615ull);
  BOOST_TEST(a.model.vocab == 12);
  BOOST_TEST(a.model.max_len == 10);
  BOOST_TEST(a.model.d_model == 48);
  BOOST_TEST(a.model.n_head == 6);
  BOOST_TEST(a.model.d_ff == 96);
  BOOST_TEST(a.model.n_layers == 3);
  BOOST_TEST(!a.model.norm_first);
  BOOST_TEST((a.model.positional == PositionalKind::sinusoidal));
  BOOST_TEST(a.model.dropout == 0.1);
  BOOST_TEST((a.trainer.optimizer == OptimizerKind::adamw));
  BOOST_TEST(a.trainer.lr == 2e-3);
  BOOST_TEST(a.trainer.min_lr == 1e-4);
  BOOST_TEST(a.trainer.weight_decay == 0.02);
  BOOST_TEST(a.trainer.momentum == 0.8);
  BOOST_TEST(a.trainer.warmup_steps == 50);
  BOOST_TEST((a.trainer.schedule == LrDecay::linear));
  BOOST_TEST(a.trainer.clip_norm == 0.5);
  BOOST_TEST(a.trainer.steps == 900);
  BOOST_TEST(a.trainer.eval_every == 30);
  BOOST_TEST(a.eval_sequences == 1000);
  BOOST_TEST(a.trainer.target_seq_acc == 0.95);
  BOOST_TEST(a.trainer.threads == 2);
  BOOST_TEST(a.save_path == "a.safetensors");
  BOOST_TEST(a.log_path == "m.jsonl");
  BOOST_TEST(a.plot_path == "p.svg");
  BOOST_TEST(a.quiet);
  BOOST_TEST(parse({"--pre-norm"}).model.norm_first);
  BOOST_TEST(parse({"-h"}).usage.find("Usage: train_sequence") != std::string::npos);
  BOOST_TEST(parse({"--version"}).usage.rfind("attograd ", 0) == 0);
}

BOOST_AUTO_TEST_CASE(help_wins_over_later_checks_and_the_usage_lists_every_flag) {
  const std::string usage = parse({"--help"}).usage;
  BOOST_TEST(usage.find("Usage: train_sequence") != std::string::npos);
  BOOST_TEST(parse({"--vocab", "5", "--help", "--heads", "7"}).usage == usage);  // 7 does not divide 64: not checked
  BOOST_TEST(parse({"--no-such-flag", "-h"}).usage == usage);
  BOOST_TEST(usage.find("=" + std::to_string(TrainerOptions{}.steps)) != std::string::npos, usage);
  for (const char* flag : {"--task", "--shift-k", "--vocab", "--length", "--d-model", "--heads", "--d-ff", "--layers",
                           "--pre-norm", "--post-norm", "--dropout", "--optimizer", "--lr", "--weight-decay",
                           "--warmup", "--schedule", "--steps", "--batch", "--eval-every", "--target-acc", "--seed",
                           "--threads", "--save", "--resume", "--log", "--plot", "--quiet", "--help"}) {
    BOOST_TEST(usage.find(flag) != std::string::npos, flag);
  }
}

BOOST_AUTO_TEST_CASE(unknown_flags_and_missing_values_are_usage_errors) {
  AG_CHECK_THROWS_WITH(parse({"--epochs", "3"}), UsageError, "unknown flag --epochs");
  AG_CHECK_THROWS_WITH(parse({"reverse"}), UsageError, "unexpected argument 'reverse'");
  AG_CHECK_THROWS_WITH(parse({"--steps"}), UsageError, "--steps", "missing");
  AG_CHECK_THROWS_WITH(parse({"--log="}), UsageError, "--log", "missing");
  AG_CHECK_THROWS_WITH(parse({"--quiet=maybe"}), UsageError, "quiet");
  AG_CHECK_THROWS_WITH(parse({"--lr", "1e-3", "--lr", "2e-3"}), UsageError, "--lr", "received 2");
  // A usage error is an invalid_argument, so library-style handlers catch it too.
  BOOST_CHECK_THROW(parse({"--bogus"}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(malformed_and_out_of_range_numbers_name_the_flag) {
  AG_CHECK_THROWS_WITH(parse({"--steps", "abc"}), UsageError, "--steps", "'abc' is not an integer");
  AG_CHECK_THROWS_WITH(parse({"--steps", "12x"}), UsageError, "--steps", "'12x'");
  AG_CHECK_THROWS_WITH(parse({"--steps", "1.5"}), UsageError, "--steps", "'1.5'");
  AG_CHECK_THROWS_WITH(parse({"--steps", "0"}), UsageError, "--steps", "0 is out of range [1, 2147483647]");
  AG_CHECK_THROWS_WITH(parse({"--steps", "99999999999999999999"}), UsageError, "--steps");
  AG_CHECK_THROWS_WITH(parse({"--batch", "-4"}), UsageError, "--batch", "out of range");
  AG_CHECK_THROWS_WITH(parse({"--vocab", "1"}), UsageError, "--vocab", "out of range");
  AG_CHECK_THROWS_WITH(parse({"--heads", "0"}), UsageError, "--heads");
  AG_CHECK_THROWS_WITH(parse({"--lr", "fast"}), UsageError, "--lr", "'fast' is not a finite number");
  AG_CHECK_THROWS_WITH(parse({"--lr", "nan"}), UsageError, "--lr");
  AG_CHECK_THROWS_WITH(parse({"--lr", "inf"}), UsageError, "--lr");
  AG_CHECK_THROWS_WITH(parse({"--lr", "0"}), UsageError, "--lr");
  AG_CHECK_THROWS_WITH(parse({"--dropout", "1"}), UsageError, "--dropout", "out of range [0, 1)");
  AG_CHECK_THROWS_WITH(parse({"--momentum", "-0.1"}), UsageError, "--momentum");
  AG_CHECK_THROWS_WITH(parse({"--target-acc", "1.5"}), UsageError, "--target-acc");
  AG_CHECK_THROWS_WITH(parse({"--target-acc", "0"}), UsageError, "--target-acc");
  AG_CHECK_THROWS_WITH(parse({"--threads", "0"}), UsageError, "--threads", "'0'", "[1, 256]");
  AG_CHECK_THROWS_WITH(parse({"--threads", "all"}), UsageError, "--threads", "'all'", "'auto' or a whole number");
  AG_CHECK_THROWS_WITH(parse({"--seed", "-1"}), UsageError, "--seed", "unsigned");
}

BOOST_AUTO_TEST_CASE(bad_choices_and_contradictions_are_usage_errors) {
  AG_CHECK_THROWS_WITH(parse({"--task", "translate"}), UsageError, "--task", "translate", "copy|reverse|sort|shift");
  AG_CHECK_THROWS_WITH(parse({"--optimizer", "lion"}), UsageError, "--optimizer", "lion", "sgd|adam|adamw");
  AG_CHECK_THROWS_WITH(parse({"--schedule", "step"}), UsageError, "--schedule", "step");
  AG_CHECK_THROWS_WITH(parse({"--positional", "rotary"}), UsageError, "--positional", "rotary");
  AG_CHECK_THROWS_WITH(parse({"--heads", "5"}), UsageError, "--heads", "5", "--d-model 64");
  AG_CHECK_THROWS_WITH(parse({"--task", "shift", "--length", "4", "--shift-k", "4"}), UsageError, "--shift-k",
                       "--length 4");
  AG_CHECK_THROWS_WITH(parse({"--shift-k", "2"}), UsageError, "--shift-k", "--task shift");
  AG_CHECK_THROWS_WITH(parse({"--pre-norm", "--post-norm"}), UsageError, "--pre-norm", "--post-norm");
  AG_CHECK_THROWS_WITH(parse({"--warmup", "500", "--steps", "500"}), UsageError, "--warmup", "--steps 500");
  BOOST_TEST(parse({"--warmup", "500", "--steps", "500", "--schedule", "constant"}).trainer.warmup_steps == 500);
  AG_CHECK_THROWS_WITH(parse({"--lr", "1e-3", "--min-lr", "1e-2"}), UsageError, "--min-lr", "--lr");
}

BOOST_AUTO_TEST_CASE(resume_takes_the_run_from_the_checkpoint) {
  const TrainSequenceArgs a = parse({"--resume", "ckpt.safetensors", "--eval-every", "7", "--threads", "2"});
  BOOST_TEST(a.resume_path == "ckpt.safetensors");
  BOOST_TEST(a.trainer.eval_every == 7);
  // --steps is the one trajectory flag a resumed run takes: a budget to extend the run to.
  BOOST_TEST(parse({"--resume", "ckpt.safetensors", "--steps", "500"}).extend_to == 500);
  BOOST_TEST(parse({"--resume", "ckpt.safetensors"}).extend_to == 0);
  for (const char* flag : {"--lr", "--task", "--d-model", "--seed", "--batch", "--dropout"}) {
    const std::vector<std::string> args = {"--resume", "ckpt.safetensors", flag,
                                           std::string(flag) == "--task"      ? "sort"
                                           : std::string(flag) == "--dropout" ? "0.5"
                                                                              : "1"};
    AG_CHECK_THROWS_WITH(parse_training_args<TrainSequenceArgs>(args), UsageError, flag, "--resume");
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(train_sequence_config_files)

BOOST_AUTO_TEST_CASE(a_config_file_sets_flags_and_the_command_line_wins) {
  TempDir dir;
  const std::string path = dir.file("run.toml");
  spit(path, "# a sort run\ntask = \"sort\"\nsteps = 700\nlr = 2e-3\npost-norm = true\n");
  const TrainSequenceArgs a = parse_training_args<TrainSequenceArgs>({"--config", path});
  BOOST_TEST((a.task.kind == SequenceTaskKind::sort));
  BOOST_TEST(a.trainer.steps == 700);
  BOOST_TEST(a.trainer.lr == 2e-3);
  BOOST_TEST(!a.model.norm_first);
  const TrainSequenceArgs b = parse_training_args<TrainSequenceArgs>({"--config", path, "--lr", "1e-3", "--steps=800"});
  BOOST_TEST(b.trainer.lr == 1e-3);
  BOOST_TEST(b.trainer.steps == 800);
  BOOST_TEST((b.task.kind == SequenceTaskKind::sort));  // the rest still from the file
}

BOOST_AUTO_TEST_CASE(bad_keys_types_and_values_name_the_file_key_and_line) {
  TempDir dir;
  const std::string path = dir.file("bad.toml");
  spit(path, "task = \"sort\"\n\nlearning-rate = 0.1\n");
  AG_CHECK_THROWS_WITH(parse_training_args<TrainSequenceArgs>({"--config", path}), UsageError, path, "line 3", "learning-rate");
  spit(path, "steps = 700\nbatch = \"many\"\n");
  AG_CHECK_THROWS_WITH(parse_training_args<TrainSequenceArgs>({"--config", path}), UsageError, path, "line 2", "'batch'", "many",
                       "not an integer");
  spit(path, "# comment\nsteps = 700\nlr = 5000\n");
  AG_CHECK_THROWS_WITH(parse_training_args<TrainSequenceArgs>({"--config", path}), UsageError, path, "line 3", "'lr'", "5000",
                       "out of range [0, 1000]");
  spit(path, "optimizer = \"lion\"\n");
  AG_CHECK_THROWS_WITH(parse_training_args<TrainSequenceArgs>({"--config", path}), UsageError, path, "line 1", "'optimizer'", "lion");
  // The same bad value given on the command line is the command line's problem, not the file's.
  spit(path, "steps = 700\n");
  AG_CHECK_THROWS_WITH(parse_training_args<TrainSequenceArgs>({"--config", path, "--lr", "5000"}), UsageError, "--lr", "5000");
  AG_CHECK_THROWS_WITH(parse_training_args<TrainSequenceArgs>({"--config", dir.file("absent.toml")}), UsageError, "absent.toml");
  // A FIFO would block the reader forever, /dev/zero would never end: refused before reading.
  BOOST_REQUIRE(::mkfifo(dir.file("pipe.toml").c_str(), 0600) == 0);
  AG_CHECK_THROWS_WITH(parse_training_args<TrainSequenceArgs>({"--config", dir.file("pipe.toml")}), UsageError, "pipe.toml",
                       "not a regular file");
  AG_CHECK_THROWS_WITH(parse_training_args<TrainSequenceArgs>({"--config=/dev/zero"}), UsageError, "/dev/zero", "not a regular file");
  // Empty paths (an unset shell variable) are refused, not taken as "no file".
  AG_CHECK_THROWS_WITH(parse({"--save", ""}), UsageError, "--save", "empty");
  AG_CHECK_THROWS_WITH(parse({"--resume="}), UsageError, "--resume");
}

BOOST_AUTO_TEST_CASE(the_written_configuration_reads_back_to_the_same_options) {
  TempDir dir;
  const TrainSequenceArgs a = parse({"--task", "shift", "--shift-k", "3", "--length", "10", "--post-norm", "--lr",
                                     "0.0012345678901234567", "--seed", "18446744073709551615", "--optimizer", "sgd",
                                     "--dropout", "0.1", "--steps", "123", "--eval-every", "7"});
  spit(dir.file("written.toml"), a.config_text);
  const TrainSequenceArgs b = parse_training_args<TrainSequenceArgs>({"--config", dir.file("written.toml")});
  BOOST_TEST(sequence_task_options_to_json(b.task) == sequence_task_options_to_json(a.task));
  BOOST_TEST(sequence_model_options_to_json(b.model) == sequence_model_options_to_json(a.model));
  BOOST_TEST(trainer_options_to_json(b.trainer) == trainer_options_to_json(a.trainer));
  BOOST_TEST(b.trainer.lr == a.trainer.lr);  // every digit of a double survives the file
  BOOST_TEST(b.trainer.eval_every == 7);
  BOOST_TEST(b.seed == a.seed);
  // And the file written from the file is the same file.
  BOOST_TEST(b.config_text == a.config_text);
}

// The run itself, from the command line and from the configuration it wrote: the same losses,
// bit for bit (what train_sequence does with the parsed options, for a few steps).
BOOST_AUTO_TEST_CASE(a_run_from_the_written_configuration_repeats_the_run_bit_for_bit) {
  TempDir dir;
  const TrainSequenceArgs a = parse({"--task", "sort", "--length", "6", "--vocab", "6", "--d-model", "16", "--heads",
                                     "2", "--d-ff", "32", "--dropout", "0.1", "--lr", "0.0031", "--seed", "7",
                                     "--steps", "30", "--warmup", "3"});
  spit(dir.file("run.toml"), a.config_text);
  const TrainSequenceArgs b = parse_training_args<TrainSequenceArgs>({"--config", dir.file("run.toml")});
  const auto losses = [](const TrainSequenceArgs& args) {
    manual_seed(args.seed);
    SequenceModel model(args.model);
    SequenceJob job(model, args.task, args.eval_sequences);
    Trainer trainer(job, args.trainer);
    std::vector<double> out;
    for (int i = 0; i < 6; ++i) out.push_back(trainer.train_step().loss);
    return out;
  };
  const std::vector<double> la = losses(a), lb = losses(b);
  BOOST_TEST(la == lb, "the run from the written configuration differs");
  BOOST_TEST(la.front() != la.back());  // it did train
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
