// The command line of examples/train_sequence, on CLI11, apart from main() so that the tests
// can feed it bad flags and config files (tests/train/test_train_sequence_cli.cpp).
//
//   TrainSequenceArgs args = parse_train_sequence_args({"--task", "sort", "--steps=3000"});
//   TrainSequenceArgs args = parse_train_sequence_args({"--config", "run.toml", "--lr", "1e-3"});
//
// Every flag can also come from a TOML file given with --config (keys are the flag names
// without the dashes: `d-model = 96`); the command line wins over the file. The effective
// configuration is written back as TOML by train_sequence_config() (--write-config, and a copy
// beside every run's metrics log), so that `--config` of that file repeats the run exactly.
//
// Every problem (an unknown flag or key, a missing value, a value that is not a number, out of
// range or not one of the choices, flags that contradict each other) is a UsageError whose
// message names the flag, and for a config file also the file, the key and its line; main()
// prints it and exits with 2.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/models/sequence_model.h"
#include "attograd/train/io/outputs.h"
#include "attograd/train/data/sequence_tasks.h"
#include "attograd/train/trainer.h"
#include "threads_flag.h"

#ifndef ATTOGRAD_VERSION
#define ATTOGRAD_VERSION "unknown"
#endif

namespace ag {

class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct TrainSequenceArgs {
  SequenceTaskOptions task;             // seed = --seed
  SequenceModelOptions model;   // vocab and max_len follow the task
  TrainerOptions trainer;
  uint64_t seed = 0;            // the initialisation, the dropout masks and the training data
  std::string save_path;        // checkpoint, written at every evaluation and at the end
  std::string resume_path;
  std::string log_path;         // empty: runs/<task>/metrics.jsonl
  std::string plot_path;        // empty: runs/<task>/plot.svg
  std::string config_path;      // --config: flags read from this TOML file
  std::string write_config_path;  // --write-config: the effective configuration goes here
  bool overwrite = false;       // replace an existing checkpoint or file of another run
  bool quiet = false;
  bool help = false;
  bool version = false;
  std::string config_text;      // the effective configuration as TOML (see train_sequence_config)
};

namespace detail {

// A finite number within [low, high] (or [low, high) when high_open): CLI11's Range lets NaN
// through, and a learning rate of NaN is no learning rate.
inline CLI::Validator finite_range(double low, double high, bool high_open = false) {
  std::ostringstream range;
  range << "[" << low << ", " << high << (high_open ? ")" : "]");
  const std::string description = range.str();
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        std::istringstream in(text);
        if (!(in >> v) || !(in >> std::ws).eof() || !std::isfinite(v)) return "'" + text + "' is not a finite number";
        if (v < low || v > high || (high_open && v == high)) return text + " is out of range " + description;
        return {};
      },
      description);
}

inline CLI::Validator int_range(int64_t low, int64_t high) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        int64_t v = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
          return "'" + text + "' is not an integer";
        }
        if (v < low || v > high) {
          return text + " is out of range [" + std::to_string(low) + ", " + std::to_string(high) + "]";
        }
        return {};
      },
      "[" + std::to_string(low) + ", " + std::to_string(high) + "]");
}

inline CLI::Validator unsigned_64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t v = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
          return "'" + text + "' is not an unsigned 64-bit integer";
        }
        return {};
      },
      "UINT64");
}

inline CLI::Validator one_of(std::vector<std::string> choices) {
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) list += (i ? "|" : "") + choices[i];
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        if (std::find(choices.begin(), choices.end(), text) != choices.end()) return {};
        return "'" + text + "' is not one of " + list;
      },
      list);
}

// Keys of a TOML/INI file with their line numbers, to say where a bad value came from.
inline std::vector<std::pair<std::string, int>> config_keys(const std::string& path) {
  std::vector<std::pair<std::string, int>> keys;
  std::ifstream in(path);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    // `  key = value`: the name is the run of [A-Za-z0-9_.-] before '=' (blanks around it allowed).
    const size_t begin = line.find_first_not_of(" \t");
    const size_t eq = line.find('=');
    if (begin == std::string::npos || eq == std::string::npos || eq <= begin) continue;
    std::string name = line.substr(begin, eq - begin);
    name.erase(name.find_last_not_of(" \t") + 1);
    const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-';
    });
    if (plain) keys.emplace_back(name, number);
  }
  return keys;
}

// CLI11's message, plus the config file's key and line when the value came from there.
inline std::string explain(const std::string& message, const std::string& config_path,
                           const std::vector<std::string>& argv) {
  if (config_path.empty()) return message;
  for (const auto& [key, line] : config_keys(config_path)) {
    const std::string flag = "--" + key;
    const bool named = message.find(flag + ":") != std::string::npos || message.find(flag + " ") != std::string::npos ||
                       message.find(flag + "=") != std::string::npos || message.find("parse " + key) != std::string::npos ||
                       message.rfind(flag, 0) == 0;
    const bool on_command_line = std::any_of(argv.begin(), argv.end(), [&](const std::string& arg) {
      return arg == flag || arg.rfind(flag + "=", 0) == 0;
    });
    if (named && !on_command_line) {
      return "config file '" + config_path + "', line " + std::to_string(line) + ", key '" + key + "': " + message;
    }
  }
  return "config file '" + config_path + "': " + message;
}

// The --config file named in argv ("" for none), looked at before CLI11 opens it: CLI11 would
// read anything, and a FIFO blocks while /dev/zero never ends. UsageError unless it is a
// regular file of at most 1 MiB.
inline std::string checked_config_path(const std::vector<std::string>& argv) {
  std::string path;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--config" && i + 1 < argv.size()) path = argv[i + 1];
    if (argv[i].rfind("--config=", 0) == 0) path = argv[i].substr(9);
  }
  if (path.empty()) return path;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw UsageError("--config: '" + path + "' does not exist");
  if (!std::filesystem::is_regular_file(status)) throw UsageError("--config: '" + path + "' is not a regular file");
  if (std::filesystem::file_size(path, ec) > (1u << 20)) {
    throw UsageError("--config: '" + path + "' is larger than 1 MiB, too large for a configuration");
  }
  return path;
}

// Runs CLI11 over argv, every failure a UsageError that names the flag (and the config file's
// key and line). False when --version was asked for.
inline bool parse_command_line(CLI::App& app, const std::vector<std::string>& argv, const std::string& config_path) {
  try {
    std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11 takes them last first
    app.parse(reversed);
  } catch (const CLI::CallForVersion&) {
    return false;
  } catch (const CLI::ExtrasError&) {
    // CLI11 lists the leftovers; name the first one the way a user would look for it.
    const std::vector<std::string> rest = app.remaining();
    const std::string first = rest.empty() ? "?" : rest.front();
    throw UsageError(first.rfind('-', 0) == 0 ? "unknown flag " + first + " (see --help)"
                                              : "unexpected argument '" + first + "' (flags start with --; see --help)");
  } catch (const CLI::ParseError& e) {
    throw UsageError(explain(e.what(), config_path, argv));
  }
  return true;
}

// CLI11's TOML with our first line, and without the paths left empty (an empty path is
// refused when read back; unset is what they were).
inline std::string configuration_text(const std::string& toml, const std::string& program = "train_sequence") {
  std::istringstream in(toml);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.size() > 3 && line.compare(line.size() - 3, 3, "=\"\"") == 0) {
      if (!lines.empty() && lines.back().rfind('#', 0) == 0) lines.pop_back();  // its description
      continue;
    }
    lines.push_back(line);
  }
  std::string out = std::string(kConfigMarker) + " (run it with " + program + " --config FILE)\n";
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

}  // namespace detail

// Declares every flag on `app`, bound to `a` (string choices go through `choices`, which must
// outlive the parse). The defaults shown come from the option structs.
struct TrainSequenceChoices {
  std::string task, positional, optimizer, schedule;
  std::string threads = "auto";
  bool pre_norm = false, post_norm = false;
};

inline void declare_train_sequence_flags(CLI::App& app, TrainSequenceArgs& a, TrainSequenceChoices& c) {
  using namespace detail;
  using ML = SequenceModelLimits;
  using TL = SequenceTaskLimits;
  using RL = TrainerLimits;
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
  c.task = sequence_task_name(a.task.kind);
  c.positional = positional_kind_name(a.model.positional);
  c.optimizer = optimizer_kind_name(a.trainer.optimizer);
  c.schedule = lr_decay_name(a.trainer.schedule);

  app.description(
      "Trains a small transformer encoder on a toy sequence task and reports held-out accuracy.\n"
      "The defaults train `reverse` (length 16, vocab 16) to 99% exact-sequence accuracy in seconds.");
  app.set_help_flag("-h,--help", "this text");
  app.set_version_flag("--version", std::string("attograd ") + ATTOGRAD_VERSION)->configurable(false);
  app.set_config("--config", "", "read flags from this TOML file (flags on the command line win)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);

  const auto text = [&](const char* flag, std::string& into, const char* help, const char* group) {
    return app.add_option(flag, into, help)->group(group);
  };
  // An empty path is what an unset shell variable gives: never what the user meant.
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

  text("--task", c.task, "what to learn", "task")->check(one_of({"copy", "reverse", "sort", "shift"}));
  integer("--shift-k", a.task.shift, 1, kBig, "rotation of the shift task, 1 <= K < length", "task");
  integer("--vocab", a.task.vocab_size, 2, TL::vocab_size, "tokens 0..V-1", "task");
  integer("--length", a.task.seq_len, 1, std::min(TL::seq_len, ML::max_len), "sequence length", "task");

  integer("--d-model", a.model.d_model, 1, ML::d_model, "width", "model");
  integer("--heads", a.model.n_head, 1, ML::n_head, "attention heads, must divide --d-model", "model");
  integer("--d-ff", a.model.d_ff, 1, ML::d_ff, "feed-forward width", "model");
  integer("--layers", a.model.n_layers, 1, ML::n_layers, "encoder blocks", "model");
  app.add_flag("--pre-norm", c.pre_norm, "LayerNorm before each sublayer (the default)")->group("model");
  app.add_flag("--post-norm", c.post_norm, "LayerNorm after each residual sum")->group("model");
  text("--positional", c.positional, "position embedding", "model")->check(one_of({"learned", "sinusoidal"}));
  real("--dropout", a.model.dropout, 0.0, 1.0, "dropout probability", "model", true);

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

  integer("--eval-every", a.trainer.eval_every, 1, kBig, "evaluate on held-out sequences every N steps",
          "evaluation and output");
  integer("--eval-sequences", a.trainer.eval_sequences, 1, RL::eval_sequences, "held-out sequences per evaluation",
          "evaluation and output");
  real("--target-acc", a.trainer.target_seq_acc, 0.0, 1.0, "stop at this held-out exact-sequence accuracy",
       "evaluation and output");
  add_threads_flag(app, c.threads, "threads for matrix products", RL::threads)
      ->group("evaluation and output");
  text("--save", a.save_path, "checkpoint (safetensors) at every evaluation and at the end", "evaluation and output")->check(path_given);
  text("--resume", a.resume_path, "continue the run saved in PATH (model, task and optimizer come from it)",
       "evaluation and output")->check(path_given);
  text("--log", a.log_path, "metrics, one JSON line per evaluation (default runs/<task>/metrics.jsonl)",
       "evaluation and output")->check(path_given);
  text("--plot", a.plot_path, "SVG plot of loss and accuracy (default runs/<task>/plot.svg)", "evaluation and output")->check(path_given);
  app.add_flag("--overwrite", a.overwrite, "let --save, --log and --plot replace files of another run")
      ->group("evaluation and output");
  app.add_flag("--quiet", a.quiet, "no progress output, only the summary")->group("evaluation and output");
  text("--write-config", a.write_config_path, "write the effective configuration as TOML to FILE and exit",
       "evaluation and output")
      ->check(path_given)
      ->configurable(false);
}

// The help text, with the defaults read from the option structs.
inline std::string train_sequence_usage(const std::string& program) {
  TrainSequenceArgs a;
  TrainSequenceChoices c;
  CLI::App app{"", program};
  declare_train_sequence_flags(app, a, c);
  return app.help();
}

inline TrainSequenceArgs parse_train_sequence_args(const std::vector<std::string>& argv) {
  TrainSequenceArgs a;  // the option structs' defaults are the README run
  TrainSequenceChoices c;
  CLI::App app{"", "train_sequence"};
  declare_train_sequence_flags(app, a, c);
  for (const std::string& arg : argv) {
    if (arg == "--help" || arg == "-h") {  // asking for help is never an error, whatever else the line holds
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
  // configuration lists every flag, so "the user asked for --shift-k" means the command line.
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
  a.task.kind = choice("--task", parse_sequence_task_kind, c.task);
  a.model.positional = choice("--positional", parse_positional_kind, c.positional);
  a.trainer.optimizer = choice("--optimizer", parse_optimizer_kind, c.optimizer);
  a.trainer.schedule = choice("--schedule", parse_lr_decay, c.schedule);
  a.trainer.threads = parse_threads(c.threads, TrainerLimits::threads);
  if (c.post_norm) a.model.norm_first = false;
  a.config_text = detail::configuration_text(app.config_to_str(/*default_also=*/true, /*write_description=*/true));

  if (!a.resume_path.empty()) {
    // The checkpoint holds everything that shapes the trajectory; a flag that changed it would
    // make the resumed run a different one.
    static constexpr const char* kFromCheckpoint[] = {
        "--task",   "--shift-k",      "--vocab",     "--length",   "--d-model",  "--heads",    "--d-ff",
        "--layers", "--pre-norm",     "--post-norm", "--positional", "--dropout", "--optimizer", "--lr",
        "--min-lr", "--weight-decay", "--momentum",  "--warmup",   "--schedule", "--clip",     "--steps",
        "--batch",  "--seed"};
    for (const char* f : kFromCheckpoint) {
      if (given(f)) {
        throw UsageError(std::string(f) + " cannot be combined with --resume: the checkpoint holds the run's model, "
                                          "task and optimizer settings");
      }
    }
    return a;
  }
  if (a.task.kind != SequenceTaskKind::shift && on_command_line("--shift-k")) throw UsageError("--shift-k needs --task shift");
  if (a.task.kind == SequenceTaskKind::shift && a.task.shift >= a.task.seq_len) {
    throw UsageError("--shift-k: " + std::to_string(a.task.shift) + " must be below --length " +
                     std::to_string(a.task.seq_len));
  }
  if (a.model.d_model % a.model.n_head != 0) {
    throw UsageError("--heads: " + std::to_string(a.model.n_head) + " does not divide --d-model " +
                     std::to_string(a.model.d_model));
  }
  if (a.trainer.min_lr > a.trainer.lr) {
    throw UsageError("--min-lr: " + std::to_string(a.trainer.min_lr) + " is above --lr " + std::to_string(a.trainer.lr));
  }
  if (!(a.trainer.lr > 0)) throw UsageError("--lr: must be positive");
  if (a.trainer.schedule != LrDecay::constant && a.trainer.warmup_steps >= a.trainer.steps) {
    throw UsageError("--warmup: " + std::to_string(a.trainer.warmup_steps) + " must be below --steps " +
                     std::to_string(a.trainer.steps) + " for a " + lr_decay_name(a.trainer.schedule) + " schedule");
  }
  if (!(a.trainer.target_seq_acc > 0)) throw UsageError("--target-acc: must be above 0");
  a.task.seed = a.seed;
  a.model.vocab = a.task.vocab_size;
  a.model.max_len = a.task.seq_len;
  // Whatever the checks above missed, the library's own validation still names.
  try {
    SequenceTask check_task(a.task);
    validate(a.model);
    validate(a.trainer);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return a;
}

}  // namespace ag
