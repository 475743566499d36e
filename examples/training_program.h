// What the training programs (train_sequence, train_gpt, train_seq2seq) share, written once:
// the flags every run has and the plumbing of a run around the one training loop (the command
// line's house style, Flags and the config files are flags.h's, shared with the other programs).
// A program's Args derive from TrainingArgs (`a.trainer.lr`, `a.save_path`) and add declare()
// for its own flags and finish() for its own checks; its run() uses a TrainingRun.
//
// Every flag can also come from a TOML file (--config; the command line wins); --write-config
// writes the effective configuration, and a fresh run leaves a copy beside its metrics log. A
// bad flag, key or value is a UsageError naming the flag (and the file, key and line): exit 2.
// With --resume the checkpoint, opened once, decides everything that shapes the trajectory.
// Under mpirun every rank trains its part of each batch and rank 0 alone writes and prints.
// Ctrl-C, SIGTERM or SIGHUP stops after the current update and saves (train/stop_signals.h).
// Exit codes: 0 done, 1 error, 2 bad command line, 130 / 143 / 129 interrupted by that signal.
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
#include "attograd/models/sequence_model.h"
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
  using ML = SequenceModelLimits;
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

// The plumbing of one run, in the order a program calls it:
//
//   TrainingRun run(args, "sequence");          // the --resume checkpoint, opened once, and the options
//   ... the model's options: from run.checkpoint() when resuming, else from the flags ...
//   run.prepare("sort", "sort: ...");           // the run's directory and outputs (rank 0), the config copy, the seed
//   SequenceModel model(options); SequenceJob job(model, task);
//   const TrainSummary s = run.train(job, describe(...));   // resume, Ctrl-C, the summary line
//   ... the program's report ...
//   return run.finish(s);                       // the last lines and the exit code
class TrainingRun {
 public:
  TrainingRun(const TrainingArgs& args, const char* kind) : args_(args), comm_(Communicator::world()) {
    // Under mpirun, this rank of a data-parallel run. Every rank but 0 discards what it writes
    // to stdout (a stream without a buffer drops its output); errors still go to stderr.
    if (!comm_.is_root()) std::cout.rdbuf(nullptr);
    if (!args.resume_path.empty()) require_model_kind(ck_.emplace(Checkpoint::open(args.resume_path)), kind);
    // A resumed run's trajectory comes from the checkpoint; only what observes it from the flags.
    trainer = ck_ ? resumed_trainer_options(*ck_, args.trainer) : args.trainer;
    if (ck_ && args.extend_to > 0) {
      // A longer budget continues the run: its schedule now ends at the new last step.
      if (args.extend_to <= trainer.steps) {
        throw UsageError("--steps " + std::to_string(args.extend_to) + " with --resume extends the run, so it must be " +
                         "above the checkpoint's budget of " + std::to_string(trainer.steps) +
                         " steps (to stop a run earlier, Ctrl-C it: it saves where it stops)");
      }
      trainer.steps = args.extend_to;
    }
    trainer.communicator = &comm_;
    trainer.identity = configuration_identity(args.config_text);  // compared across ranks
  }

  const Checkpoint* checkpoint() const { return ck_ ? &*ck_ : nullptr; }
  const std::string& checkpoint_path() const { return out_.checkpoint_path; }  // after prepare()
  // What the model and task are built from: the checkpoint's entry `key` (parsed, a complaint
  // naming the file) when resuming, else what the flags say.
  template <typename Parse, typename Options>
  Options options(const std::string& key, Parse parse, const Options& flags) const {
    return ck_ ? ck_->parse_entry(key, parse) : flags;
  }
  TrainerOptions trainer;  // what the run trains with
  // Checkpoints leave out the frozen parameters (a fine-tuning run's --save-adapter-only).
  void save_trainable_only(bool on) { out_.save_trainable_only = on; }

  // Before anything is built or written: a batch of `batch_rows` splits evenly over the
  // processes and into the --grad-accum micro-batches, and the model, its optimizer state and a
  // step's activations fit in memory (train/memory.h); `flags` names the flags that drive the size.
  void check_fits(int64_t batch_rows, const MemoryEstimate& need, const std::string& flags) const {
    shard_of(batch_rows, comm_.rank(), comm_.size(), ck_ ? "the checkpoint's batch (a resumed run keeps it)" : "--batch",
             !ck_);
    check_micro_batches(batch_rows, comm_.size(), trainer.grad_accum);
    check_memory_fits(need, available_memory_bytes(),
                      ck_ ? "the checkpoint's model and task settings are too large for this machine" : flags);
  }

  // Before anything is built: the outputs can be written and destroy nothing (over several
  // processes rank 0 alone writes them), and a fresh run's parameters are seeded. The plot's
  // title ends with the optimizer and its learning rate.
  void prepare(const std::string& run_of, const std::string& plot_title) {
    // The run's own directory, for what no flag names: a fresh run gets a new one (rank 0 makes
    // it), a resumed run goes on in its checkpoint's.
    const bool default_save = args_.program->saves && args_.save_path.empty();
    if (ck_) {
      dir_ = std::filesystem::path(args_.resume_path).parent_path().string();
      if (dir_.empty()) dir_ = ".";
    } else if (comm_.is_root() && (args_.log_path.empty() || args_.plot_path.empty() || default_save)) {
      dir_ = make_run_directory("runs/" + std::string(args_.program->name) + "/" + run_of, args_.run_name,
                                args_.overwrite);
    }
    out_.checkpoint_path = default_save && !ck_ ? dir_ + "/ckpt.safetensors" : args_.save_path;
    out_.log_path = args_.log_path.empty() ? dir_ + "/metrics.jsonl" : args_.log_path;
    out_.plot_path = args_.plot_path.empty() ? dir_ + "/plot.svg" : args_.plot_path;
    out_.plot_title = plot_title + ", " + optimizer_kind_name(trainer.optimizer) + " lr " + format_number(trainer.lr);
    // The configuration goes beside the metrics log, so that `--config` of it repeats the run:
    // config.toml in a run's directory, <name>.config.toml beside a log given as <name>.jsonl (so
    // that two runs logging side by side in one folder keep a configuration each).
    const std::filesystem::path log_path(out_.log_path);
    const std::string config_copy =
        (log_path.parent_path() /
         (log_path.filename() == "metrics.jsonl" ? "config.toml" : log_path.stem().string() + ".config.toml"))
            .string();
    if (comm_.is_root()) {
      locks_ = prepare_outputs({{"--save", out_.checkpoint_path, OutputKind::checkpoint},
                                {"--log", out_.log_path, OutputKind::metrics_log},
                                {"--plot", out_.plot_path, OutputKind::plot},
                                {"the configuration copy", config_copy, OutputKind::config}},
                               {.resume = args_.resume_path, .overwrite = args_.overwrite, .inputs = args_.inputs});
      if (!ck_) write_file_atomically(config_copy, args_.config_text);  // a resume keeps the run's own
    } else {
      out_.log_path = out_.plot_path = out_.checkpoint_path = "";
    }
    if (!args_.quiet) {
      out_.progress = &std::cout;
      // Under mpirun rank 0 writes to a pty even when mpirun's output goes to a file: no redrawing.
      out_.interactive = stdout_is_terminal() && comm_.size() == 1;
    }
    if (!ck_) manual_seed(args_.seed);  // the parameters are drawn from the default generator
  }

  // Trains the job from where the checkpoint left off (or from the start), Ctrl-C stopping it
  // after the current update, and prints the description before and the summary line after.
  TrainSummary train(TrainingJob& job, const std::string& description) {
    Trainer& t = trainer_.emplace(job, trainer, out_);
    if (ck_) {
      t.resume(*ck_);
      std::cout << "resumed " << args_.resume_path << " at step " << t.step() << "\n";
    }
    if (!dir_.empty()) std::cout << "run    " << dir_ << "\n";
    const std::string& ckpt = out_.checkpoint_path;
    if (!ckpt.empty()) std::cout << "save   " << ckpt << " at every evaluation and at the end\n";
    std::cout << description << blas_kernel_note();
    check_stdout_writes();
    const TrainSummary s = [&] {
      const StopOnSignals stop(t);
      return t.run();
    }();
    std::cout << "\n"
              << (s.reached_target             ? "reached the target"
                  : s.interrupted              ? "interrupted"
                  : std::isnan(s.eval.seq_acc) ? "done"  // no accuracy, no target
                                               : "step budget used up, target not reached")
              << " after " << s.steps << " steps (" << s.steps_this_run << " in this session) in "
              << format_duration(s.run_s) << " (" << format_rate(s.tokens_per_s) << " tokens/s)";
    if (s.elapsed_s > s.run_s + 0.05) std::cout << ", " << format_duration(s.elapsed_s) << " over all sessions";
    std::cout << "\n";
    return s;
  }

  // The data-parallel report, where the run's files are (`hint` ends the checkpoint's line), and
  // the exit code: 128 + the signal that stopped the run.
  int finish(const TrainSummary& s, const std::string& hint = "") {
    if (const DataParallel* dp = trainer_->data_parallel()) std::cout << dp->report() << "\n";
    if (!dir_.empty()) std::cout << "run    " << dir_ << "\n";
    std::cout << "metrics " << out_.log_path << "\nplot    " << out_.plot_path << "\n";
    const std::string& ckpt = out_.checkpoint_path;
    if (!ckpt.empty()) std::cout << "checkpoint " << ckpt << " (continue with --resume " << ckpt << hint << ")\n";
    check_stdout_writes();  // the files are written: only what was printed is in question
    return s.interrupted ? interrupted_exit_status(s) : 0;
  }

 private:
  const TrainingArgs& args_;
  Communicator& comm_;
  std::optional<Checkpoint> ck_;  // the one read of the resumed file
  TrainerOutputs out_;
  std::optional<Trainer> trainer_;
  OutputLocks locks_;  // this run alone writes its outputs, until it ends
  std::string dir_;    // the run's directory ("" when flags name every output)
};

// The main() of the training programs: the command line (a UsageError exits 2 with a pointer
// to --help), --help, --version, --write-config (the effective configuration, written
// atomically, then exit 0), then the run, whose exception exits 1 with its message. Under
// mpirun a rank that fails must not leave the others waiting in their next collective: its
// error, or a non-zero status, ends the whole job through Communicator::abort.
template <typename Args>
int training_program_main(int argc, char** argv, int (*run)(const Args&)) {
  const std::string program = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : Args::kInfo.name;
  const auto usage_error = [&](const UsageError& e) {
    std::cerr << program << ": " << e.what() << "\n(" << program << " --help lists the flags)\n";
    return 2;
  };
  Args args;
  try {
    args = parse_training_args<Args>(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    return usage_error(e);  // every rank reads the same line, so every rank stops here alone
  } catch (const std::exception& e) {
    // What a check of the line had to read to decide (an --init-from file that is no weights
    // file, say): an error of that file, exit 1, on every rank alike.
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
  if (!args.usage.empty()) return (std::cout << args.usage, 0);
  Communicator& comm = Communicator::world();
  int status = 0;
  try {
    require_stdout_open();
    if (args.write_config_path.empty()) {
      status = run(args);
    } else if (comm.is_root()) {  // under mpirun one rank writes the file
      prepare_outputs({{"--write-config", args.write_config_path, OutputKind::config}},
                      {.overwrite = args.overwrite, .inputs = args.inputs});
      write_file_atomically(args.write_config_path, args.config_text);
      std::cout << "wrote the configuration to " << args.write_config_path << " (run it with --config "
                << args.write_config_path << ")\n";
    }
    check_stdout_writes();
  } catch (const UsageError& e) {
    status = usage_error(e);  // what only the run can see, e.g. a text too short for the context
  } catch (const RanksDisagree& e) {
    // Every rank found the same difference and ends alone: no abort racing the others' aborts.
    std::cerr << comm.abort_line(program + ": error: " + e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    if (comm.size() > 1) comm.abort(program + ": error: " + e.what(), 1);
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
  if (comm.size() > 1 && status != 0 && !is_interrupted_exit_status(status)) {
    comm.abort(program + ": the run ended with status " + std::to_string(status), status);
  }
  return status;
}

}  // namespace ag
