// The command line of examples/train_seq2seq, on CLI11, apart from main() so that its checks can
// be read (and tested) on their own. It shares the validators, the usage error and the
// config-file handling of train_sequence_cli.h.
//
//   TrainSeq2SeqArgs args = parse_train_seq2seq_args({"--task", "addition", "--beam", "4"});
//   TrainSeq2SeqArgs args = parse_train_seq2seq_args({"--config", "runs/addition/config.toml"});
//
// Every flag can also come from a TOML file given with --config (`d-model = 96`); the command
// line wins. Every problem is a UsageError naming the flag and the value (for a config file also
// the file, key and line); main() prints it and exits with 2.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/models/seq2seq.h"
#include "attograd/train/data/seq2seq_tasks.h"
#include "attograd/train/trainer.h"
#include "train_sequence_cli.h"

namespace ag {

struct TrainSeq2SeqArgs {
  // reverse-var over 10 symbols, 1 to 8 long; addition takes 1 to 8 digits per operand.
  Seq2SeqTaskOptions task{.kind = Seq2SeqTaskKind::reverse_var, .symbols = 10, .min_len = 1, .max_len = 8,
                          .batch_size = 64};
  // The original Transformer's shape, small: post-norm, sinusoidal positions, ReLU.
  // src_vocab, tgt_vocab and max_len follow the task.
  Seq2SeqOptions model{.src_vocab = 0, .tgt_vocab = 0, .max_len = 0, .d_model = 64, .n_head = 4, .d_ff = 256,
                       .n_encoder_layers = 2, .n_decoder_layers = 2, .dropout = 0.0};
  TrainerOptions trainer = default_trainer();
  uint64_t seed = 0;             // the initialisation, the dropout masks and the training data
  int64_t beam = 1;              // the final held-out decoding and the examples: 1 is greedy
  double length_penalty = 0.6;   // GNMT's alpha for beam search
  std::string save_path;         // checkpoint, written at every evaluation and at the end
  std::string resume_path;
  std::string log_path;          // empty: runs/<task>/metrics.jsonl
  std::string plot_path;         // empty: runs/<task>/plot.svg
  std::string threads = "auto";  // --threads, resolved into trainer.threads
  std::string config_path;       // --config: flags read from this TOML file
  std::string write_config_path;  // --write-config: the effective configuration goes here
  std::string config_text;       // the effective configuration as TOML (every flag, its value)
  bool overwrite = false;
  bool quiet = false;
  bool json = false;             // end with one JSON line of the results (bench/compare_seq2seq.sh)
  bool help = false;
  bool version = false;

  static TrainerOptions default_trainer() {
    TrainerOptions o;
    o.optimizer = OptimizerKind::adam;
    o.lr = 1e-3;
    o.min_lr = 1e-4;
    o.warmup_steps = 100;
    o.steps = 4000;
    o.clip_norm = 1.0;
    o.eval_every = 100;
    o.eval_sequences = 512;
    o.target_seq_acc = 0.99;
    return o;
  }
};

// String choices and flags that map onto enums, kept apart from the options they set.
struct TrainSeq2SeqChoices {
  std::string task, positional, activation, optimizer, schedule;
  bool pre_norm = false, post_norm = false;
};

inline void declare_train_seq2seq_flags(CLI::App& app, TrainSeq2SeqArgs& a, TrainSeq2SeqChoices& c) {
  using namespace detail;
  using ML = Seq2SeqLimits;
  using TL = Seq2SeqTaskLimits;
  using RL = TrainerLimits;
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
  c.task = seq2seq_task_name(a.task.kind);
  c.positional = positional_kind_name(a.model.positional);
  c.activation = activation_name(a.model.activation);
  c.optimizer = optimizer_kind_name(a.trainer.optimizer);
  c.schedule = lr_decay_name(a.trainer.schedule);

  app.description(
      "Trains an encoder-decoder transformer (the original Transformer, small) on a generated task of\n"
      "variable-length sequences and decodes held-out sources greedily or with beam search.\n"
      "The defaults train reverse-var (1 to 8 symbols) to 99% exact held-out outputs.");
  app.set_help_flag("-h,--help", "this text");
  app.set_version_flag("--version", std::string("attograd ") + ATTOGRAD_VERSION)->configurable(false);
  app.set_config("--config", "", "read flags from this TOML file (flags on the command line win)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);

  const CLI::Validator path_given(
      [](std::string& p) -> std::string { return p.empty() ? std::string("the path is empty") : std::string(); }, "PATH");
  const auto text = [&](const char* flag, std::string& into, const char* help, const char* group) {
    return app.add_option(flag, into, help)->group(group);
  };
  const auto integer = [&](const char* flag, int64_t& into, int64_t low, int64_t high, const char* help,
                           const char* group) {
    return app.add_option(flag, into, help)->check(int_range(low, high))->group(group);
  };
  const auto real = [&](const char* flag, double& into, double low, double high, const char* help, const char* group,
                        bool high_open = false) {
    return app.add_option(flag, into, help)->check(finite_range(low, high, high_open))->group(group);
  };

  text("--task", c.task, "what to learn", "task")->check(one_of({"addition", "reverse-var", "sort-var", "dedup"}));
  integer("--symbols", a.task.symbols, 1, TL::symbols, "distinct symbols (not addition: ten digits)", "task");
  integer("--min-len", a.task.min_len, 1, TL::max_len, "shortest source (addition: digits per operand)", "task");
  integer("--max-len", a.task.max_len, 1, TL::max_len, "longest source (addition: digits per operand, at most 18)",
          "task");

  integer("--d-model", a.model.d_model, 1, ML::d_model, "width", "model");
  integer("--heads", a.model.n_head, 1, ML::n_head, "attention heads, must divide --d-model", "model");
  integer("--d-ff", a.model.d_ff, 1, ML::d_ff, "feed-forward width", "model");
  integer("--encoder-layers", a.model.n_encoder_layers, 1, ML::n_layers, "encoder layers", "model");
  integer("--decoder-layers", a.model.n_decoder_layers, 1, ML::n_layers, "decoder layers", "model");
  app.add_flag("--pre-norm", c.pre_norm, "LayerNorm before each sublayer")->group("model");
  app.add_flag("--post-norm", c.post_norm, "LayerNorm after each residual sum (the default, as the paper)")
      ->group("model");
  text("--positional", c.positional, "position embedding", "model")->check(one_of({"learned", "sinusoidal"}));
  text("--activation", c.activation, "feed-forward nonlinearity", "model")->check(one_of({"relu", "gelu"}));
  real("--dropout", a.model.dropout, 0.0, 1.0, "dropout probability", "model", true);
  app.add_flag("--share-embeddings", a.model.share_embeddings, "one token table for source and target")->group("model");
  app.add_flag("--tie-head", a.model.tie_head, "the output head multiplies by the target table")->group("model");

  text("--optimizer", c.optimizer, "update rule", "optimisation")->check(one_of({"sgd", "adam", "adamw"}));
  real("--lr", a.trainer.lr, 0.0, RL::lr, "peak learning rate (after warm-up)", "optimisation");
  real("--min-lr", a.trainer.min_lr, 0.0, RL::lr, "learning rate at the end of the decay", "optimisation");
  real("--weight-decay", a.trainer.weight_decay, 0.0, RL::lr, "L2 (sgd, adam) or decoupled (adamw)", "optimisation");
  real("--momentum", a.trainer.momentum, 0.0, 1.0, "SGD momentum", "optimisation", true);
  integer("--warmup", a.trainer.warmup_steps, 0, kBig, "linear warm-up steps", "optimisation");
  text("--schedule", c.schedule, "decay after warm-up", "optimisation")->check(one_of({"constant", "cosine", "linear"}));
  real("--clip", a.trainer.clip_norm, 0.0, RL::clip_norm, "max gradient norm, 0 = off", "optimisation");
  integer("--steps", a.trainer.steps, 1, kBig, "step budget and end of the decay", "optimisation");
  integer("--batch", a.task.batch_size, 1, TL::batch_size, "sequences per step", "optimisation");
  app.add_option("--seed", a.seed, "initialisation, dropout and training data")->check(unsigned_64())->group("optimisation");

  const char* out = "evaluation and output";
  integer("--eval-every", a.trainer.eval_every, 1, kBig, "decode the held-out sources every N steps", out);
  integer("--eval-sequences", a.trainer.eval_sequences, 1, RL::eval_sequences, "held-out sources", out);
  real("--target-acc", a.trainer.target_seq_acc, 0.0, 1.0, "stop at this held-out exact-match rate (greedy)", out);
  integer("--beam", a.beam, 1, 64, "beam width of the final held-out decoding and the examples (1: greedy)", out);
  real("--length-penalty", a.length_penalty, 0.0, 100.0, "beam search's GNMT alpha (0: log-probability alone)", out);
  add_threads_flag(app, a.threads, "threads for matrix products", RL::threads)->group(out);
  text("--save", a.save_path, "checkpoint (safetensors) at every evaluation and at the end", out)->check(path_given);
  text("--resume", a.resume_path, "continue the run saved in PATH (model, task and optimizer come from it)", out)
      ->check(path_given);
  text("--log", a.log_path, "metrics, one JSON line per evaluation (default runs/<task>/metrics.jsonl)", out)
      ->check(path_given);
  text("--plot", a.plot_path, "SVG plot of loss and accuracy (default runs/<task>/plot.svg)", out)->check(path_given);
  app.add_flag("--overwrite", a.overwrite, "let --save, --log and --plot replace files of another run")->group(out);
  app.add_flag("--quiet", a.quiet, "no progress output, only the summary")->group(out);
  app.add_flag("--json", a.json, "end with one JSON line of the results")->group(out);
  text("--write-config", a.write_config_path, "write the effective configuration as TOML to FILE and exit", out)
      ->check(path_given)
      ->configurable(false);
}

inline std::string train_seq2seq_usage(const std::string& program) {
  TrainSeq2SeqArgs a;
  TrainSeq2SeqChoices c;
  CLI::App app{"", program};
  declare_train_seq2seq_flags(app, a, c);
  return app.help();
}

inline TrainSeq2SeqArgs parse_train_seq2seq_args(const std::vector<std::string>& argv) {
  TrainSeq2SeqArgs a;
  TrainSeq2SeqChoices c;
  CLI::App app{"", "train_seq2seq"};
  declare_train_seq2seq_flags(app, a, c);
  for (const std::string& arg : argv) {
    if (arg == "--help" || arg == "-h") {  // asking for help is never an error
      a.help = true;
      return a;
    }
  }
  a.config_path = detail::checked_config_path(argv);
  if (!detail::parse_command_line(app, argv, a.config_path)) {
    a.version = true;
    return a;
  }
  // Given at all (command line or config file), or on the command line itself: a written
  // configuration lists every flag, so "the user asked for --symbols" means the command line.
  const auto given = [&](const char* flag) { return app.count(flag) > 0; };
  const auto on_command_line = [&](const std::string& flag) {
    return std::any_of(argv.begin(), argv.end(),
                       [&](const std::string& arg) { return arg == flag || arg.rfind(flag + "=", 0) == 0; });
  };
  if (c.pre_norm && c.post_norm) throw UsageError("--pre-norm and --post-norm contradict each other");
  const auto choice = [&](const char* flag, auto parse, const std::string& value) {
    try {
      return parse(value);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string(flag) + ": " + e.what());
    }
  };
  a.task.kind = choice("--task", parse_seq2seq_task_kind, c.task);
  a.model.positional = choice("--positional", parse_positional_kind, c.positional);
  a.model.activation = choice("--activation", parse_activation, c.activation);
  a.trainer.optimizer = choice("--optimizer", parse_optimizer_kind, c.optimizer);
  a.trainer.schedule = choice("--schedule", parse_lr_decay, c.schedule);
  a.model.norm_first = c.pre_norm;
  a.trainer.threads = parse_threads(a.threads, TrainerLimits::threads);
  a.config_text = detail::configuration_text(app.config_to_str(/*default_also=*/true, /*write_description=*/true),
                                             "train_seq2seq");

  if (!a.resume_path.empty()) {
    // The checkpoint holds what shapes the run; a flag that changed it would make another run.
    static constexpr const char* kFromCheckpoint[] = {
        "--task",   "--symbols",        "--min-len",  "--max-len",    "--d-model",  "--heads",   "--d-ff",
        "--encoder-layers", "--decoder-layers", "--pre-norm", "--post-norm", "--positional", "--activation",
        "--dropout", "--share-embeddings", "--tie-head", "--optimizer", "--lr",     "--min-lr",  "--weight-decay",
        "--momentum", "--warmup",        "--schedule", "--clip",       "--steps",    "--batch",   "--seed"};
    for (const char* f : kFromCheckpoint) {
      if (given(f)) {
        throw UsageError(std::string(f) + " cannot be combined with --resume: the checkpoint holds the run's model, "
                                          "task and optimizer settings");
      }
    }
    return a;
  }
  if (a.task.kind == Seq2SeqTaskKind::addition && on_command_line("--symbols")) {
    throw UsageError("--symbols: the addition task has its own ten digits and '+'");
  }
  if (a.task.min_len > a.task.max_len) {
    throw UsageError("--min-len: " + std::to_string(a.task.min_len) + " is above --max-len " +
                     std::to_string(a.task.max_len));
  }
  if (a.task.kind == Seq2SeqTaskKind::addition && a.task.max_len > Seq2SeqTaskLimits::addition_digits) {
    throw UsageError("--max-len: " + std::to_string(a.task.max_len) + " digits per operand is more than " +
                     std::to_string(Seq2SeqTaskLimits::addition_digits) + " (the sum must fit in 64 bits)");
  }
  if (a.model.d_model % a.model.n_head != 0) {
    throw UsageError("--heads: " + std::to_string(a.model.n_head) + " does not divide --d-model " +
                     std::to_string(a.model.d_model));
  }
  if (!(a.trainer.lr > 0)) throw UsageError("--lr: must be above 0, got " + format_number(a.trainer.lr));
  if (a.trainer.min_lr > a.trainer.lr) {
    throw UsageError("--min-lr: " + format_number(a.trainer.min_lr) + " is above --lr " + format_number(a.trainer.lr));
  }
  if (a.trainer.schedule != LrDecay::constant && a.trainer.warmup_steps >= a.trainer.steps) {
    throw UsageError("--warmup: " + std::to_string(a.trainer.warmup_steps) + " must be below --steps " +
                     std::to_string(a.trainer.steps) + " for a " + lr_decay_name(a.trainer.schedule) + " schedule");
  }
  if (!(a.trainer.target_seq_acc > 0)) throw UsageError("--target-acc: must be above 0");
  a.task.seed = a.seed;
  try {  // the model's sizes follow the task; the library's own validation names what is left
    const Seq2SeqTask task(a.task);
    a.model.src_vocab = a.model.tgt_vocab = task.vocab_size();
    a.model.max_len = std::max(task.max_source_len(), task.max_target_len() + 1);
    validate(a.model);
    validate(a.trainer);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return a;
}

}  // namespace ag
