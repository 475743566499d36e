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
#include <initializer_list>
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
#include "training_flags.h"

#ifndef ATTOGRAD_VERSION
#define ATTOGRAD_VERSION "unknown"
#endif

namespace ag {

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
  TrainingRun(const TrainingArgs& args, const char* kind) : TrainingRun(args, {kind}) {}
  // A program that trains several kinds (train_gpt: "gpt" and "llama"): a resumed checkpoint
  // may hold any of them (the first names the program's kind in the refusal of another), and
  // kind() says which it holds.
  TrainingRun(const TrainingArgs& args, std::initializer_list<const char*> kinds)
      : args_(args), comm_(Communicator::world()) {
    // Under mpirun, this rank of a data-parallel run. Every rank but 0 discards what it writes
    // to stdout (a stream without a buffer drops its output); errors still go to stderr.
    if (!comm_.is_root()) std::cout.rdbuf(nullptr);
    if (!args.resume_path.empty()) {
      const Checkpoint& ck = ck_.emplace(Checkpoint::open(args.resume_path));
      kind_ = checkpoint_model_kind(ck.info());
      if (std::find(kinds.begin(), kinds.end(), kind_) == kinds.end()) require_model_kind(ck, *kinds.begin());
    }
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
  // The resumed checkpoint's model_kind; empty for a fresh run.
  const std::string& kind() const { return kind_; }
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
  std::string kind_;              // its model_kind
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
