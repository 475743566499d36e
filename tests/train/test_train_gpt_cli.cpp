// The command line of tools/train_gpt (CLI11): the defaults are the README's baby run (AdamW,
// cosine decay), every flag reaches its option (the recipe knobs too: betas, decay on matrices,
// bias, evaluation windows), the optimizer choices the other programs have,
// bad values and contradictions are refused naming the flag and the value, --resume refuses the
// flags the checkpoint decides, and a TOML config file is read with the command line winning.
#include <filesystem>
#include <fstream>

#include "attograd/models/gpt/gpt_options.h"
#include "tools/train_gpt_cli.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {

TrainGPTArgs parse(std::initializer_list<const char*> args) {
  return parse_training_args<TrainGPTArgs>(std::vector<std::string>(args.begin(), args.end()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(train_gpt_args)

BOOST_AUTO_TEST_CASE(the_defaults_are_the_baby_model_on_fortunes) {
  const TrainGPTArgs a = parse({});
  BOOST_TEST(a.data.empty());  // the fortunes corpus
  BOOST_TEST(a.tokenizer == "char");
  BOOST_TEST(a.model.n_layers == 4);
  BOOST_TEST(a.model.n_head == 4);
  BOOST_TEST(a.model.d_model == 128);
  BOOST_TEST(a.model.block_size == 64);
  BOOST_TEST(a.job.batch == 32);
  // The default run (README): AdamW with a cosine decay, nanoGPT's betas and decayed set for small
  // models, 1000 steps.
  BOOST_TEST((a.trainer.optimizer == OptimizerKind::adamw));
  BOOST_TEST((a.trainer.schedule == LrDecay::cosine));
  BOOST_TEST(a.trainer.lr == 3e-3);
  BOOST_TEST(a.trainer.min_lr == 3e-4);
  BOOST_TEST(a.trainer.weight_decay == 0.1);
  BOOST_TEST((a.trainer.decay == DecayParams::matrices));
  BOOST_TEST(a.trainer.warmup_steps == 50);
  BOOST_TEST(a.trainer.steps == 1000);
  BOOST_TEST(a.trainer.clip_norm == 1.0);
  BOOST_TEST(a.trainer.eval_every == 100);
  BOOST_TEST(a.model.bias);
  BOOST_TEST(a.trainer.beta1 == 0.9);
  BOOST_TEST(a.trainer.beta2 == 0.99);
  BOOST_TEST(a.job.eval_windows == 64);
  BOOST_TEST(!a.eval_full);
  // Filled in by the run: runs/train_gpt/<text>/<n>/ckpt.safetensors, metrics.jsonl, plot.svg.
  BOOST_TEST(a.save_path.empty());
  BOOST_TEST(a.log_path.empty());
  BOOST_TEST(a.plot_path.empty());
  BOOST_TEST(a.program->saves);
  BOOST_TEST(a.threads == "auto");
  BOOST_TEST(a.trainer.threads == usable_cores());  // --threads auto: the cores this process may use
}

BOOST_AUTO_TEST_CASE(every_flag_reaches_its_option) {
  const TrainGPTArgs a = parse({"--data", "my.txt", "--tokenizer", "byte", "--layers", "2", "--heads", "3",
                                "--d-model", "48", "--block-size", "64", "--dropout", "0.1", "--batch", "8",
                                "--steps", "500", "--lr", "1e-3", "--min-lr", "1e-4", "--warmup", "20",
                                "--weight-decay", "0.05", "--clip", "0.5", "--seed", "7", "--eval-every", "25",
                                "--optimizer", "sgd", "--momentum", "0.8", "--schedule", "linear",
                                "--threads", "1", "--save", "a.st", "--log", "a.jsonl", "--plot", "a.svg",
                                "--overwrite", "--quiet"});
  BOOST_TEST(a.data == std::vector<std::string>{"my.txt"}, boost::test_tools::per_element());
  BOOST_TEST(a.tokenizer == "byte");
  BOOST_TEST(a.model.n_layers == 2);
  BOOST_TEST(a.model.n_head == 3);
  BOOST_TEST(a.model.d_model == 48);
  BOOST_TEST(a.model.block_size == 64);
  BOOST_TEST(a.model.dropout == 0.1);
  BOOST_TEST(a.job.batch == 8);
  BOOST_TEST(a.trainer.steps == 500);
  BOOST_TEST(a.trainer.lr == 1e-3);
  BOOST_TEST(a.trainer.min_lr == 1e-4);
  BOOST_TEST(a.trainer.warmup_steps == 20);
  BOOST_TEST(a.trainer.weight_decay == 0.05);
  BOOST_TEST(a.trainer.clip_norm == 0.5);
  BOOST_TEST(a.seed == 7u);
  BOOST_TEST(a.job.seed == 7u);  // the batches and the samples
  BOOST_TEST((a.trainer.optimizer == OptimizerKind::sgd));
  BOOST_TEST(a.trainer.momentum == 0.8);
  BOOST_TEST((a.trainer.schedule == LrDecay::linear));
  BOOST_TEST(a.trainer.eval_every == 25);
  BOOST_TEST(a.trainer.threads == 1);
  BOOST_TEST(a.save_path == "a.st");
  BOOST_TEST(a.log_path == "a.jsonl");
  BOOST_TEST(a.plot_path == "a.svg");
  BOOST_TEST(a.overwrite);
  BOOST_TEST(a.quiet);
}

// The optimiser's part of a GPT-2 recipe, shared by every program: AdamW's betas and weight
// decay on matrices alone; both are the checkpoint's on --resume.
BOOST_AUTO_TEST_CASE(the_betas_and_the_decayed_set_reach_their_options) {
  const TrainGPTArgs a = parse({"--beta1", "0.8", "--beta2", "0.95", "--decay-params", "matrices"});
  BOOST_TEST(a.trainer.beta1 == 0.8);
  BOOST_TEST(a.trainer.beta2 == 0.95);
  BOOST_TEST((a.trainer.decay == DecayParams::matrices));
  BOOST_TEST((parse({"--decay-params", "all"}).trainer.decay == DecayParams::all));
  AG_CHECK_THROWS_WITH(parse({"--beta1", "1"}), UsageError, "--beta1", "1", "[0, 1)");
  AG_CHECK_THROWS_WITH(parse({"--beta2", "-0.1"}), UsageError, "--beta2", "-0.1");
  AG_CHECK_THROWS_WITH(parse({"--decay-params", "weights"}), UsageError, "--decay-params", "weights", "all|matrices");
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--beta1", "0.8"}, {"--beta2", "0.95"}, {"--decay-params", "matrices"}}) {
    std::vector<std::string> args = {"--resume", "c.st"};
    args.insert(args.end(), flags.begin(), flags.end());
    AG_CHECK_THROWS_WITH(parse_training_args<TrainGPTArgs>(args), UsageError, flags[0], "--resume");
  }
}

// The model's and the evaluation's part: the bias switch (the checkpoint's on --resume), and how
// much of the validation split an evaluation reads (only observes the run: allowed with --resume).
BOOST_AUTO_TEST_CASE(the_bias_switch_and_the_evaluation_windows_reach_their_options) {
  const TrainGPTArgs a = parse({"--no-bias", "--eval-windows", "200", "--eval-full"});
  BOOST_TEST(!a.model.bias);
  BOOST_TEST(a.job.eval_windows == 200);
  BOOST_TEST(a.eval_full);
  BOOST_TEST(parse({"--bias"}).model.bias);
  AG_CHECK_THROWS_WITH(parse({"--eval-windows", "0"}), UsageError, "--eval-windows", "0");
  const TrainGPTArgs resumed = parse({"--resume", "c.st", "--eval-windows", "500", "--eval-full"});
  BOOST_TEST(resumed.job.eval_windows == 500);
  BOOST_TEST(resumed.eval_full);
  for (const char* flag : {"--bias", "--no-bias"}) {
    AG_CHECK_THROWS_WITH(parse_training_args<TrainGPTArgs>({"--resume", "c.st", flag}), UsageError, "--bias", "--resume");
  }
}

// A preset fills the model's shape and GPT-2's tokenizer; a flag given beside it wins, in
// either order; --init-from is an input of the run and, like the preset, a setting --resume
// refuses. Without a preset the exact GELU stays the default.
BOOST_AUTO_TEST_CASE(a_preset_sets_gpt2s_shape_and_the_flags_beside_it_win) {
  const TrainGPTArgs a = parse({"--preset", "gpt2"});
  BOOST_TEST(a.model.n_layers == 12);
  BOOST_TEST(a.model.n_head == 12);
  BOOST_TEST(a.model.d_model == 768);
  BOOST_TEST(a.model.block_size == 1024);
  BOOST_TEST(a.model.dropout == 0.1);
  BOOST_TEST(a.model.bias);
  BOOST_TEST((a.model.activation == Activation::gelu_tanh));
  BOOST_TEST(a.tokenizer == "gpt2");
  const TrainGPTArgs medium = parse({"--preset", "gpt2-medium"});
  BOOST_TEST(medium.model.n_layers == 24);
  BOOST_TEST(medium.model.n_head == 16);
  BOOST_TEST(medium.model.d_model == 1024);
  for (const TrainGPTArgs& b : {parse({"--preset", "gpt2", "--layers", "2", "--block-size", "128", "--dropout", "0",
                                       "--activation", "gelu", "--tokenizer", "byte", "--no-bias"}),
                                parse({"--layers", "2", "--block-size", "128", "--dropout", "0", "--activation", "gelu",
                                       "--tokenizer", "byte", "--no-bias", "--preset", "gpt2"})}) {
    BOOST_TEST(b.model.n_layers == 2);
    BOOST_TEST(b.model.block_size == 128);
    BOOST_TEST(b.model.dropout == 0.0);
    BOOST_TEST(!b.model.bias);
    BOOST_TEST((b.model.activation == Activation::gelu));
    BOOST_TEST(b.tokenizer == "byte");
    BOOST_TEST(b.model.d_model == 768);  // not given: the preset's
  }
  BOOST_TEST((parse({}).model.activation == Activation::gelu));
  BOOST_TEST(parse({}).model.vocab_multiple == 1);
  BOOST_TEST(parse({"--vocab-multiple", "64"}).model.vocab_multiple == 64);
  BOOST_TEST((parse({"--activation", "gelu_tanh"}).model.activation == Activation::gelu_tanh));
  AG_CHECK_THROWS_WITH(parse({"--preset", "gpt3"}), UsageError, "--preset", "gpt3", "gpt2|gpt2-medium|gpt2-tiny");
  AG_CHECK_THROWS_WITH(parse({"--activation", "swish"}), UsageError, "--activation", "swish");
  const TrainGPTArgs init = parse({"--init-from", "gpt2/model.safetensors"});
  bool listed = false;
  for (const InputFile& in : init.inputs) listed = listed || (in.role == "--init-from" && in.path == "gpt2/model.safetensors");
  BOOST_TEST(listed);
  for (const char* flag : {"--preset", "--init-from"}) {
    AG_CHECK_THROWS_WITH(parse_training_args<TrainGPTArgs>({"--resume", "c.st", flag, "gpt2"}), UsageError, flag, "--resume");
  }
}

BOOST_AUTO_TEST_CASE(the_tokenizer_is_a_name_or_a_vocabulary_file) {
  BOOST_TEST(parse({"--tokenizer", "gpt2"}).tokenizer == "gpt2");
  TempDir dir;
  const std::string vocab = dir.file("fortunes.bpe");
  std::ofstream(vocab) << "{}";
  const TrainGPTArgs a = parse_training_args<TrainGPTArgs>({"--tokenizer", vocab});
  BOOST_TEST(a.tokenizer == vocab);
  // An input of the run, so no output may replace it.
  bool listed = false;
  for (const InputFile& in : a.inputs) listed = listed || (in.role == "--tokenizer" && in.path == vocab);
  BOOST_TEST(listed);
  AG_CHECK_THROWS_WITH(parse_training_args<TrainGPTArgs>({"--tokenizer", dir.file("missing.bpe")}), UsageError,
                       "--tokenizer", dir.file("missing.bpe"), "gpt2");
}

BOOST_AUTO_TEST_CASE(bad_values_name_the_flag_and_the_value) {
  AG_CHECK_THROWS_WITH(parse({"--tokenizer", "word"}), UsageError, "--tokenizer", "word");
  AG_CHECK_THROWS_WITH(parse({"--layers", "0"}), UsageError, "--layers", "0");
  AG_CHECK_THROWS_WITH(parse({"--steps", "ten"}), UsageError, "--steps", "ten");
  AG_CHECK_THROWS_WITH(parse({"--dropout", "1"}), UsageError, "--dropout", "1");
  AG_CHECK_THROWS_WITH(parse({"--lr", "nan"}), UsageError, "--lr", "nan");
  AG_CHECK_THROWS_WITH(parse({"--heads", "3"}), UsageError, "--heads", "3", "--d-model 128");
  AG_CHECK_THROWS_WITH(parse({"--lr", "1e-3", "--min-lr", "1e-2"}), UsageError, "--min-lr", "--lr");
  AG_CHECK_THROWS_WITH(parse({"--warmup", "1000"}), UsageError, "--warmup", "1000", "--steps 1000");
  BOOST_TEST(parse({"--warmup", "1000", "--schedule", "constant"}).trainer.warmup_steps == 1000);
  AG_CHECK_THROWS_WITH(parse({"--optimizer", "lion"}), UsageError, "--optimizer", "lion", "sgd|adam|adamw");
  AG_CHECK_THROWS_WITH(parse({"--schedule", "step"}), UsageError, "--schedule", "step");
  AG_CHECK_THROWS_WITH(parse({"--momentum", "1"}), UsageError, "--momentum", "1");
  AG_CHECK_THROWS_WITH(parse({"--data", ""}), UsageError, "--data");
  AG_CHECK_THROWS_WITH(parse({"--colour", "red"}), UsageError, "unknown flag", "--colour");
  AG_CHECK_THROWS_WITH(parse({"--threads", "many"}), UsageError, "--threads", "'many'", "'auto' or a whole number");
  AG_CHECK_THROWS_WITH(parse({"--threads", "0"}), UsageError, "--threads", "'0'", "[1, 256]");
}

BOOST_AUTO_TEST_CASE(resume_keeps_the_runs_settings_and_saves_over_its_file) {
  const TrainGPTArgs a = parse({"--resume", "runs/train_gpt/fortunes/1/ckpt.safetensors", "--eval-every", "10"});
  BOOST_TEST(a.resume_path == "runs/train_gpt/fortunes/1/ckpt.safetensors");
  BOOST_TEST(a.save_path == "runs/train_gpt/fortunes/1/ckpt.safetensors");
  BOOST_TEST(a.trainer.eval_every == 10);
  for (const char* flag : {"--layers", "--lr", "--seed", "--tokenizer", "--block-size", "--batch", "--optimizer",
                           "--schedule", "--momentum"}) {
    const std::string value = flag == std::string("--tokenizer")   ? "byte"
                              : flag == std::string("--optimizer") ? "sgd"
                              : flag == std::string("--schedule")  ? "linear"
                              : flag == std::string("--momentum")  ? "0.5"
                                                                   : "2";
    const std::vector<std::string> args = {"--resume", "c.st", flag, value};
    AG_CHECK_THROWS_WITH(parse_training_args<TrainGPTArgs>(args), UsageError, flag, "--resume");
  }
}

BOOST_AUTO_TEST_CASE(a_config_file_is_read_and_the_command_line_wins) {
  TempDir dir;
  const std::string path = dir.file("gpt.toml");
  std::ofstream(path) << "# a small run\nlayers = 2\nd-model = 64\nsteps = 120\n";
  const TrainGPTArgs a = parse_training_args<TrainGPTArgs>({"--config", path});
  BOOST_TEST(a.model.n_layers == 2);
  BOOST_TEST(a.model.d_model == 64);
  BOOST_TEST(a.trainer.steps == 120);
  const TrainGPTArgs b = parse_training_args<TrainGPTArgs>({"--config", path, "--steps", "80"});
  BOOST_TEST(b.trainer.steps == 80);
  std::ofstream(path) << "layers = 2\ncolour = 3\n";
  AG_CHECK_THROWS_WITH(parse_training_args<TrainGPTArgs>({"--config", path}), UsageError, "colour");
  AG_CHECK_THROWS_WITH(parse_training_args<TrainGPTArgs>({"--config", dir.file("missing.toml")}), UsageError, "--config",
                       "missing.toml", "does not exist");
  AG_CHECK_THROWS_WITH(parse_training_args<TrainGPTArgs>({"--config", dir.path()}), UsageError, "--config", "not a regular file");
}

BOOST_AUTO_TEST_CASE(the_written_configuration_reads_back_to_the_same_options) {
  TempDir dir;
  const TrainGPTArgs a = parse_training_args<TrainGPTArgs>(
      {"--data", "my text.txt", "--tokenizer", "byte", "--layers", "3", "--heads", "2", "--d-model", "48", "--dropout",
       "0.1", "--lr", "0.0012345678901234567", "--seed", "18446744073709551615", "--steps", "123", "--warmup", "7",
       "--eval-every", "9", "--optimizer", "sgd", "--batch", "12", "--no-bias", "--beta2", "0.95", "--decay-params",
       "matrices", "--eval-windows", "96", "--eval-full", "--write-config", dir.file("gpt.toml")});
  BOOST_TEST(a.write_config_path == dir.file("gpt.toml"));
  BOOST_TEST(a.config_text.rfind("# attograd configuration (run it with train_gpt --config FILE)", 0) == 0);
  BOOST_TEST(a.config_text.find("write-config") == std::string::npos);  // the file is not told to write itself
  std::ofstream(dir.file("gpt.toml")) << a.config_text;
  const TrainGPTArgs b = parse_training_args<TrainGPTArgs>({"--config", dir.file("gpt.toml")});
  // The written configuration names its paths absolutely: the same file wherever it is read from.
  BOOST_TEST(b.data == std::vector<std::string>{std::filesystem::absolute("my text.txt").string()},
             boost::test_tools::per_element());
  BOOST_TEST(b.tokenizer == "byte");
  BOOST_TEST(gpt_options_to_json(b.model) == gpt_options_to_json(a.model));
  BOOST_TEST(trainer_options_to_json(b.trainer) == trainer_options_to_json(a.trainer));
  BOOST_TEST(b.trainer.lr == a.trainer.lr);  // every digit of a double survives the file
  BOOST_TEST((b.trainer.optimizer == OptimizerKind::sgd));
  BOOST_TEST(b.seed == a.seed);
  BOOST_TEST(b.job.seed == a.seed);
  BOOST_TEST(b.job.batch == 12);
  BOOST_TEST(b.trainer.eval_every == 9);
  BOOST_TEST(!b.model.bias);
  BOOST_TEST(b.trainer.beta2 == 0.95);
  BOOST_TEST((b.trainer.decay == DecayParams::matrices));
  BOOST_TEST(b.job.eval_windows == 96);
  BOOST_TEST(b.eval_full);
  BOOST_TEST(b.config_text == a.config_text);  // and the file written from the file is the same file
}

// --data takes several sources, after one flag or repeated, in order; a corpus name stays a
// name (not made a path, not an input file the outputs must avoid), ./NAME is a file; the
// written configuration lists them as a TOML array that reads back to the same sources.
BOOST_AUTO_TEST_CASE(data_takes_several_files_and_corpus_names_in_order) {
  TempDir dir;
  const TrainGPTArgs a = parse_training_args<TrainGPTArgs>(
      {"--data", "a.txt", "bible", "--data", "./fortunes", "--write-config", dir.file("gpt.toml")});
  BOOST_TEST(a.data == (std::vector<std::string>{"a.txt", "bible", "./fortunes"}), boost::test_tools::per_element());
  std::vector<std::string> inputs;
  for (const InputFile& f : a.inputs) {
    if (f.role == "--data") inputs.push_back(f.path);
  }
  BOOST_TEST(inputs == (std::vector<std::string>{"a.txt", "./fortunes"}), boost::test_tools::per_element());
  const std::string abs_a = std::filesystem::absolute("a.txt").lexically_normal().string();
  const std::string abs_f = std::filesystem::absolute("./fortunes").lexically_normal().string();
  BOOST_TEST(a.config_text.find("data=[\"" + abs_a + "\", \"bible\", \"" + abs_f + "\"]") != std::string::npos, a.config_text);
  std::ofstream(dir.file("gpt.toml")) << a.config_text;
  const TrainGPTArgs b = parse_training_args<TrainGPTArgs>({"--config", dir.file("gpt.toml")});
  BOOST_TEST(b.data == (std::vector<std::string>{abs_a, "bible", abs_f}), boost::test_tools::per_element());
  // None given: no data line at all, so the configuration reads back to the default.
  const TrainGPTArgs none = parse({});
  BOOST_TEST(none.config_text.find("data=") == std::string::npos);
  AG_CHECK_THROWS_WITH(parse({"--data", ""}), UsageError, "--data", "empty");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
