// The command line of examples/train_gpt, on CLI11, apart from main() so that its checks can be
// read (and tested) on their own. It shares the validators, the usage error and the config-file
// handling of train_sequence_cli.h.
//
//   TrainGPTArgs args = parse_train_gpt_args({"--steps", "300", "--d-model", "64"});
//   TrainGPTArgs args = parse_train_gpt_args({"--config", "gpt.toml"});
//
// Every flag can also come from a TOML file given with --config (`d-model = 96`); the command
// line wins. Every problem is a UsageError naming the flag and the value (for a config file also
// the file, key and line); main() prints it and exits with 2.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/models/gpt.h"
#include "attograd/train/gpt_trainer.h"
#include "train_sequence_cli.h"

namespace ag {

// Where a run writes when no flag says otherwise (generate's README command reads the checkpoint).
inline constexpr const char* kGPTRunDir = "runs/gpt";

struct TrainGPTArgs {
  std::string data_path;           // empty: Debian's fortunes
  std::string tokenizer = "char";  // char | byte
  // The "baby" model: 4 layers, 4 heads, d_model 128, a context of 128 characters. vocab follows
  // the tokenizer.
  GPTOptions model{.vocab = 0, .block_size = 128, .d_model = 128, .n_head = 4, .n_layers = 4, .dropout = 0.0,
                   .bias = true};
  // The step budget: about a minute on two quiet cores, a few on a busy machine (README).
  GPTTrainerOptions trainer = default_trainer();
  std::string save_path;    // empty: runs/gpt/ckpt.safetensors, or the resumed file itself
  std::string resume_path;
  std::string log_path = std::string(kGPTRunDir) + "/metrics.jsonl";
  std::string plot_path = std::string(kGPTRunDir) + "/plot.svg";
  std::string threads = "auto";   // --threads, resolved into trainer.threads
  std::string config_path;        // --config: flags read from this TOML file
  std::string write_config_path;  // --write-config: the effective configuration goes here
  std::string config_text;        // the effective configuration as TOML (every flag, its value)
  bool overwrite = false;
  bool quiet = false;
  bool help = false;
  bool version = false;

  static GPTTrainerOptions default_trainer() {
    GPTTrainerOptions o;
    o.batch = 32;
    o.lr = 2e-3;
    o.min_lr = 2e-4;
    o.weight_decay = 0.1;
    o.warmup_steps = 30;
    o.steps = 300;
    o.clip_norm = 1.0;
    o.seed = 0;
    o.eval_every = 50;
    o.eval_windows = 64;
    o.sample_tokens = 100;
    return o;
  }
};

inline void declare_train_gpt_flags(CLI::App& app, TrainGPTArgs& a) {
  using namespace detail;
  using GL = GPTLimits;
  using RL = TrainerLimits;
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();

  app.description(
      "Trains a small GPT on a text, character by character (or byte by byte), and prints samples as it learns.\n"
      "The defaults train the 'baby' model (4 layers, 4 heads, d_model 128, context 128) on Debian's fortunes "
      "in a few minutes on two cores.");
  app.set_help_flag("-h,--help", "this text");
  app.set_version_flag("--version", std::string("attograd ") + ATTOGRAD_VERSION)->configurable(false);
  app.set_config("--config", "", "read flags from this TOML file (flags on the command line win)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);

  const CLI::Validator path_given(
      [](std::string& p) -> std::string { return p.empty() ? std::string("the path is empty") : std::string(); }, "PATH");
  const auto integer = [&](const char* flag, int64_t& into, int64_t low, int64_t high, const char* help,
                           const char* group) {
    return app.add_option(flag, into, help)->check(int_range(low, high))->group(group);
  };
  const auto real = [&](const char* flag, double& into, double low, double high, const char* help, const char* group,
                        bool high_open = false) {
    return app.add_option(flag, into, help)->check(finite_range(low, high, high_open))->group(group);
  };

  app.add_option("--data", a.data_path, "text file to learn (default: every fortune under /usr/share/games/fortunes)")
      ->check(path_given)
      ->group("data");
  app.add_option("--tokenizer", a.tokenizer, "one token per UTF-8 character (char) or per byte (byte)")
      ->check(one_of({"char", "byte"}))
      ->group("data");

  integer("--layers", a.model.n_layers, 1, GL::n_layers, "transformer blocks", "model");
  integer("--heads", a.model.n_head, 1, GL::n_head, "attention heads, must divide --d-model", "model");
  integer("--d-model", a.model.d_model, 1, GL::d_model, "width", "model");
  integer("--block-size", a.model.block_size, 1, GL::block_size, "context length in tokens", "model");
  real("--dropout", a.model.dropout, 0.0, 1.0, "dropout probability", "model", true);

  integer("--batch", a.trainer.batch, 1, int64_t{1} << 20, "windows per step", "optimisation");
  integer("--steps", a.trainer.steps, 1, kBig, "step budget and end of the cosine decay", "optimisation");
  real("--lr", a.trainer.lr, 0.0, RL::lr, "peak learning rate of AdamW (after warm-up)", "optimisation");
  real("--min-lr", a.trainer.min_lr, 0.0, RL::lr, "learning rate at the end of the decay", "optimisation");
  integer("--warmup", a.trainer.warmup_steps, 0, kBig, "linear warm-up steps", "optimisation");
  real("--weight-decay", a.trainer.weight_decay, 0.0, RL::lr, "decoupled weight decay", "optimisation");
  real("--clip", a.trainer.clip_norm, 0.0, RL::clip_norm, "max gradient norm, 0 = off", "optimisation");
  app.add_option("--seed", a.trainer.seed, "initialisation, dropout, batches and samples")
      ->check(unsigned_64())
      ->group("optimisation");

  integer("--eval-every", a.trainer.eval_every, 1, kBig, "validation loss and a sample every N steps",
          "evaluation and output");
  add_threads_flag(app, a.threads, "threads for matrix products", RL::threads)
      ->group("evaluation and output");
  app.add_option("--save", a.save_path,
                 "checkpoint at every evaluation and at the end (default runs/gpt/ckpt.safetensors; with --resume, "
                 "the resumed file)")
      ->check(path_given)
      ->group("evaluation and output");
  app.add_option("--resume", a.resume_path, "continue the run saved in PATH (model, tokenizer and optimizer from it)")
      ->check(path_given)
      ->group("evaluation and output");
  app.add_option("--log", a.log_path, "metrics, one JSON line per evaluation")->check(path_given)->group("evaluation and output");
  app.add_option("--plot", a.plot_path, "SVG plot of the losses")->check(path_given)->group("evaluation and output");
  app.add_flag("--overwrite", a.overwrite, "let --save, --log and --plot replace files of another run")
      ->group("evaluation and output");
  app.add_flag("--quiet", a.quiet, "no progress output, only the summary")->group("evaluation and output");
  app.add_option("--write-config", a.write_config_path, "write the effective configuration as TOML to FILE and exit")
      ->check(path_given)
      ->group("evaluation and output")
      ->configurable(false);
}

inline std::string train_gpt_usage(const std::string& program) {
  TrainGPTArgs a;
  CLI::App app{"", program};
  declare_train_gpt_flags(app, a);
  return app.help();
}

inline TrainGPTArgs parse_train_gpt_args(const std::vector<std::string>& argv) {
  TrainGPTArgs a;
  CLI::App app{"", "train_gpt"};
  declare_train_gpt_flags(app, a);
  for (const std::string& arg : argv) {
    if (arg == "--help" || arg == "-h") {
      a.help = true;
      return a;
    }
  }
  a.config_path = detail::checked_config_path(argv);
  if (!detail::parse_command_line(app, argv, a.config_path)) {
    a.version = true;
    return a;
  }
  const auto given = [&](const char* flag) { return app.count(flag) > 0; };
  a.trainer.threads = parse_threads(a.threads, TrainerLimits::threads);
  a.config_text = detail::configuration_text(app.config_to_str(/*default_also=*/true, /*write_description=*/true),
                                             "train_gpt");

  if (!a.resume_path.empty()) {
    // The checkpoint holds what shapes the run; a flag that changed it would make another run.
    static constexpr const char* kFromCheckpoint[] = {
        "--tokenizer", "--layers", "--heads",        "--d-model", "--block-size", "--dropout", "--batch",
        "--steps",     "--lr",     "--min-lr",       "--warmup",  "--weight-decay", "--clip",  "--seed"};
    for (const char* f : kFromCheckpoint) {
      if (given(f)) {
        throw UsageError(std::string(f) + " cannot be combined with --resume: the checkpoint holds the run's model, "
                                          "tokenizer and optimizer settings");
      }
    }
    if (a.save_path.empty()) a.save_path = a.resume_path;
    return a;
  }
  if (a.save_path.empty()) a.save_path = std::string(kGPTRunDir) + "/ckpt.safetensors";
  if (a.model.d_model % a.model.n_head != 0) {
    throw UsageError("--heads: " + std::to_string(a.model.n_head) + " does not divide --d-model " +
                     std::to_string(a.model.d_model));
  }
  if (!(a.trainer.lr > 0)) throw UsageError("--lr: must be above 0, got " + format_number(a.trainer.lr));
  if (a.trainer.min_lr > a.trainer.lr) {
    throw UsageError("--min-lr: " + format_number(a.trainer.min_lr) + " is above --lr " + format_number(a.trainer.lr));
  }
  if (a.trainer.warmup_steps >= a.trainer.steps) {
    throw UsageError("--warmup: " + std::to_string(a.trainer.warmup_steps) + " must be below --steps " +
                     std::to_string(a.trainer.steps) + " (the cosine decay follows the warm-up)");
  }
  try {  // whatever the checks above missed, the library's own validation names
    validate(a.trainer);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return a;
}

}  // namespace ag
