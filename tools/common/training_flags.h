// The flags every training program has (the trainer's, the outputs', --resume and --config),
// the block flags the encoder tagger and the encoder-decoder share, and the parse of a whole
// command line into a program's Args; training_program.h runs what they describe.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/core/rng.h"
#include "attograd/core/threads.h"
#include "attograd/layers/positional.h"
#include "attograd/layers/transformer.h"
#include "attograd/train/dist/communicator.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/outputs.h"
#include "attograd/train/memory.h"
#include "attograd/train/report/progress.h"
#include "attograd/train/stop_signals.h"
#include "attograd/train/trainer.h"
#include "flags.h"
#include "threads_flag.h"

#ifndef ATTOGRAD_VERSION
#define ATTOGRAD_VERSION "unknown"
#endif

namespace ag {

// Standard output is checked like any file: closed at start, the next file opened (the log, a
// checkpoint) would receive the progress lines in its place; a write that fails (a full disk, a
// reader gone with SIGPIPE ignored) is an error, found at the description before any step is
// trained, or at the end, after the checkpoint is safe.
inline void require_stdout_open() {
  if (::fcntl(STDOUT_FILENO, F_GETFD) < 0) {
    throw std::runtime_error(std::string("cannot write to standard output: ") + std::strerror(errno));
  }
}

inline void check_stdout_writes() {
  if (std::cout.rdbuf() == nullptr) return;  // a rank other than 0: silenced on purpose, nothing to check
  errno = 0;
  std::cout.flush();
  if (!std::cout) {
    const int err = errno;
    throw std::runtime_error(std::string("cannot write to standard output") + (err ? ": " + std::string(std::strerror(err)) : ""));
  }
}


// What tells one training program from another where the shared code speaks of it.
struct ProgramInfo {
  const char* name;      // "train_sequence": messages and the configuration's first line
  const char* holds;     // what its checkpoints fix besides the optimizer: "model, task"
  const char* outputs;   // what names a run's directory, runs/<program>/<this>/<n>: "<task>"
  bool target = true;    // its job measures an accuracy: --target-acc stops the run there
  bool saves = false;    // a fresh run saves a checkpoint in its directory unless --save says where
};

// The flags every training program has, bound to TrainerOptions and the run's files.
struct TrainingArgs {
  TrainerOptions trainer;
  uint64_t seed = 0;  // the initialisation, the dropout masks and the training data
  // The checkpoint (at every evaluation and at the end), the one to continue, and the metrics
  // log and plot (empty: in the run's directory), and that directory's name (empty: a number).
  std::string save_path, resume_path, log_path, plot_path, run_name;
  std::string config_path, write_config_path;  // --config, --write-config
  std::string config_text;                     // the effective configuration as TOML
  std::string threads = "auto", optimizer, schedule, decay_params;  // resolved into trainer
  std::string usage;                           // --help's text or --version's line: print it and stop
  std::vector<InputFile> inputs;               // what the run reads: never one of its outputs
  const ProgramInfo* program = nullptr;        // the program's Args::kInfo
  int64_t extend_to = 0;  // --steps with --resume: the run's new budget (0: the checkpoint's)
  bool overwrite = false, quiet = false;
};


inline void check_heads(int64_t d_model, int64_t heads) {
  if (d_model % heads != 0) {
    throw UsageError("--heads: " + std::to_string(heads) + " does not divide --d-model " + std::to_string(d_model));
  }
}

// The block flags of the encoder tagger and the encoder-decoder, whose options name them alike:
// --d-model, --heads, --d-ff, --pre-norm / --post-norm, --positional, --dropout.
struct BlockChoices {
  std::string positional;
  bool pre_norm = false, post_norm = false;
};

template <typename ModelOptions>
void declare_block_flags(Flags& f, ModelOptions& m, BlockChoices& c) {
  using ML = TransformerLimits;
  c.positional = positional_kind_name(m.positional);
  const char* the_default = " (the default)";
  f.integer("--d-model", m.d_model, 1, ML::d_model, "width");
  f.integer("--heads", m.n_head, 1, ML::n_head, "attention heads, must divide --d-model");
  f.integer("--d-ff", m.d_ff, 1, ML::d_ff, "feed-forward width");
  f.flag("--pre-norm", c.pre_norm, std::string("LayerNorm before each sublayer") + (m.norm_first ? the_default : ""));
  f.flag("--post-norm", c.post_norm, std::string("LayerNorm after each residual sum") + (m.norm_first ? "" : the_default));
  f.choice("--positional", c.positional, "position embedding", {"learned", "sinusoidal"});
  f.real("--dropout", m.dropout, 0.0, 1.0, "dropout probability", true);
}

template <typename ModelOptions>
void finish_block_flags(const CommandLine& line, ModelOptions& m, const BlockChoices& c) {
  if (c.pre_norm && c.post_norm) throw UsageError("--pre-norm and --post-norm contradict each other");
  m.positional = line.choice("--positional", parse_positional_kind, c.positional);
  if (c.pre_norm || c.post_norm) m.norm_first = c.pre_norm;
  if (!line.resuming) check_heads(m.d_model, m.n_head);
}

// The "model" line of a program's description for those models, `layers` e.g. "2" or "2+2".
template <typename ModelOptions>
std::string describe_block_model(const ModelOptions& m, const std::string& layers, int64_t parameters) {
  std::ostringstream os;
  os << "model  d_model " << m.d_model << ", " << m.n_head << " heads, d_ff " << m.d_ff << ", " << layers << " layers, "
     << (m.norm_first ? "pre-norm" : "post-norm") << ", " << positional_kind_name(m.positional)
     << " positions, dropout " << m.dropout << ", " << parameters << " parameters\n";
  return os.str();
}

namespace detail {

inline void declare_training_flags(Flags& f, TrainingArgs& a, const ProgramInfo& info) {
  using RL = TrainerLimits;
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
  TrainerOptions& t = a.trainer;
  a.optimizer = optimizer_kind_name(t.optimizer);
  a.schedule = lr_decay_name(t.schedule);
  a.decay_params = decay_params_name(t.decay);
  f.group("optimisation", true);
  f.choice("--optimizer", a.optimizer, "update rule", {"sgd", "adam", "adamw"});
  f.real("--lr", t.lr, 0.0, RL::lr, "peak learning rate (after warm-up)");
  f.real("--min-lr", t.min_lr, 0.0, RL::lr, "learning rate at the end of the decay");
  f.real("--weight-decay", t.weight_decay, 0.0, RL::lr, "L2 (sgd, adam) or decoupled (adamw)");
  f.choice("--decay-params", a.decay_params,
           "what --weight-decay applies to; matrices leaves biases, norms and embedding tables alone", {"all", "matrices"});
  f.real("--momentum", t.momentum, 0.0, 1.0, "SGD momentum", true);
  f.real("--beta1", t.beta1, 0.0, 1.0, "adam, adamw: decay rate of the first moment", true);
  f.real("--beta2", t.beta2, 0.0, 1.0, "adam, adamw: decay rate of the second moment", true);
  f.integer("--warmup", t.warmup_steps, 0, kBig, "linear warm-up steps (unless given: at most a tenth of --steps)");
  f.choice("--schedule", a.schedule, "decay after warm-up", {"constant", "cosine", "linear"});
  f.real("--clip", t.clip_norm, 0.0, RL::clip_norm, "max gradient norm, 0 = off");
  f.integer("--grad-accum", t.grad_accum, 1, RL::grad_accum,
            "micro-batches per update: each process's rows of --batch in K parts, one forward and backward "
            "each (the update stays the whole batch's; activations are one part's)");
  f.integer("--steps", t.steps, 1, kBig, "step budget and end of the decay");
  f.seed(a.seed, "initialisation, dropout and training data");

  f.group("evaluation and output", false);
  const std::string out = "runs/" + std::string(info.name) + "/" + info.outputs + "/<n>";
  f.integer("--eval-every", t.eval_every, 1, kBig, "evaluate on held-out data every N steps");
  if (info.target) f.real("--target-acc", t.target_seq_acc, 0.0, 1.0, "stop at this held-out exact-sequence accuracy");
  add_threads_flag(f.app(), a.threads, "threads for matrix products", RL::threads)->group("evaluation and output");
  f.flag("--recompute", t.recompute,
         "keep only each block's input during a step and run the block again in backward: the same numbers, "
         "less memory, more time");
  f.path("--save", a.save_path, "checkpoint (safetensors) at every evaluation and at the end");
  f.path("--resume", a.resume_path, "continue the run saved in PATH (" + std::string(info.holds) +
                                        " and optimizer come from it)");
  f.path("--log", a.log_path, "metrics, one JSON line per evaluation (default " + out + "/metrics.jsonl)");
  f.path("--plot", a.plot_path, "SVG plot of loss and accuracy (default " + out + "/plot.svg)");
  f.path("--run-name", a.run_name, "the run's directory under runs/" + std::string(info.name) + "/" + info.outputs +
                                       "/ (default: the next free number; 'latest' links to the newest)");
  f.flag("--overwrite", a.overwrite, "let --save, --log, --plot and --run-name replace files of another run");
  f.flag("--quiet", a.quiet, "no progress output, only the summary");
  f.path("--write-config", a.write_config_path, "write the effective configuration as TOML to FILE and exit")
      ->configurable(false);
}

}  // namespace detail

// The parse every training program shares: --help wins over everything else on the line (its
// text goes to `usage`), --config is checked before it is read, --resume refuses what the
// checkpoint decides, the optimisation flags are checked against each other; then the program's
// finish(), and the library's own validation for whatever the checks missed.
template <typename Args>
Args parse_training_args(std::vector<std::string> argv) {
  Args a;
  CLI::App app{"", Args::kInfo.name};
  app.set_help_flag("-h,--help", "this text");
  app.set_version_flag("--version", std::string("attograd ") + ATTOGRAD_VERSION)->configurable(false);
  app.set_config("--config", "", "read flags from this TOML file (flags on the command line win)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);
  Flags f(app);
  a.declare(f);  // the program's description and own flags, then the shared ones
  detail::declare_training_flags(f, a, Args::kInfo);
  if (detail::named_in(argv, "--help") || detail::named_in(argv, "-h")) {
    a.usage = app.help();  // asking for help is never an error, whatever else the line holds
    return a;
  }
  a.config_path = detail::checked_config_path(argv);
  if (!detail::parse_command_line(app, argv, a.config_path)) {
    a.usage = std::string("attograd ") + ATTOGRAD_VERSION + "\n";  // --version
    return a;
  }
  f.anchor_paths(a.config_path, argv);

  const CommandLine line{app, argv, !a.resume_path.empty()};
  TrainerOptions& t = a.trainer;
  t.optimizer = line.choice("--optimizer", parse_optimizer_kind, a.optimizer);
  t.schedule = line.choice("--schedule", parse_lr_decay, a.schedule);
  t.decay = line.choice("--decay-params", parse_decay_params, a.decay_params);
  t.threads = parse_threads(a.threads, TrainerLimits::threads);
  if (!line.resuming && !line.given("--warmup")) {
    // Unless asked for, the warm-up follows the budget, so that any --steps runs; the written
    // configuration says what was used, so that it repeats the run.
    t.warmup_steps = std::min(t.warmup_steps, t.steps / 10);
    app.get_option("--warmup")->default_str(std::to_string(t.warmup_steps));
  }
  a.config_text = detail::configuration_text(app.config_to_str(/*default_also=*/true, /*write_description=*/true),
                                             Args::kInfo.name);
  // --steps with --resume extends a run: the one setting of its trajectory a user may move.
  if (line.resuming && line.given("--steps")) a.extend_to = t.steps;
  for (const std::string& flag : f.from_checkpoint()) {
    if (flag == "--steps") continue;
    if (line.resuming && line.given(flag.c_str())) {
      throw UsageError(flag + " cannot be combined with --resume: the checkpoint holds the run's " +
                       Args::kInfo.holds + " and optimizer settings");
    }
  }
  if (!line.resuming) {
    if (!(t.lr > 0)) throw UsageError("--lr: must be above 0, got " + format_number(t.lr));
    if (t.min_lr > t.lr) throw UsageError("--min-lr: " + format_number(t.min_lr) + " is above --lr " + format_number(t.lr));
    if (t.schedule != LrDecay::constant && t.warmup_steps >= t.steps) {
      throw UsageError("--warmup: " + std::to_string(t.warmup_steps) + " must be below --steps " +
                       std::to_string(t.steps) + " for a " + lr_decay_name(t.schedule) + " schedule");
    }
    if (!(t.target_seq_acc > 0)) throw UsageError("--target-acc: must be above 0");
  }
  a.inputs = {{"--resume", a.resume_path, InputKind::checkpoint}, {"--config", a.config_path, InputKind::config}};
  a.program = &Args::kInfo;
  if (line.resuming && line.given("--run-name")) {
    throw UsageError("--run-name cannot be combined with --resume: a resumed run goes on in its checkpoint's directory");
  }
  if (line.resuming && a.save_path.empty()) a.save_path = a.resume_path;  // a resumed run saves where it came from
  try {  // the program's own; whatever the checks missed, the library's validation still names
    a.finish(line);
    if (!line.resuming) validate(t);
  } catch (const UsageError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return a;
}

// --- the run ---------------------------------------------------------------------------------

inline std::string percent(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << 100 * v << "%";
  return os.str();
}

// The "train" line of a program's description: the optimiser, its schedule, and `rest`.
inline std::string describe_training(const TrainerOptions& t, const std::string& rest) {
  std::ostringstream os;
  os << "train  " << optimizer_kind_name(t.optimizer) << " lr " << t.lr << " (warm-up " << t.warmup_steps << ", "
     << lr_decay_name(t.schedule) << " to " << t.min_lr << "), weight decay " << t.weight_decay << ", clip "
     << t.clip_norm << ", " << rest;
  if (t.grad_accum > 1) os << ", " << t.grad_accum << " micro-batches per update";
  if (t.recompute) os << ", blocks recomputed in backward";
  os << ", " << t.threads << (t.threads == 1 ? " thread" : " threads") << "\n";
  return os.str();
}

}  // namespace ag
