// train_sequence: trains a small transformer encoder on a toy sequence task (copy, reverse, sort,
// shift), with no data to download, and reports how well it does on held-out sequences.
//
//   build/examples/train_sequence                      # reverse, length 16, vocab 16, to 99%
//   build/examples/train_sequence --task sort --steps 3000 --save runs/sort/ckpt.safetensors
//   build/examples/train_sequence --resume runs/sort/ckpt.safetensors
//
// Writes the metrics log (JSON lines) and an SVG plot of loss and accuracy under runs/<task>/
// unless --log / --plot say otherwise. Ctrl-C stops after the current step and saves the
// checkpoint (with --save), so the run can be resumed. Exit codes: 0 done, 1 error, 2 bad
// command line, 130 interrupted.
#include <csignal>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "attograd/core/rng.h"
#include "attograd/train/dist/communicator.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/memory.h"
#include "attograd/train/io/outputs.h"
#include "attograd/train/report/progress.h"
#include "attograd/train/trainer.h"
#include "program_main.h"
#include "train_sequence_cli.h"

namespace {

using namespace ag;

Trainer* g_trainer = nullptr;

// First Ctrl-C: finish the step, save, stop. A second one kills the program as usual.
extern "C" void on_interrupt(int) {
  std::signal(SIGINT, SIG_DFL);
  if (g_trainer != nullptr) g_trainer->request_stop();
}

// Tokens as one character each (0-9, then a-z) when the vocabulary allows, else numbers.
std::string format_tokens(const std::vector<int64_t>& tokens, int64_t vocab) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t t = tokens[i];
    if (vocab <= 36) {
      out += static_cast<char>(t < 10 ? '0' + t : 'a' + (t - 10));
    } else {
      if (i > 0) out += ' ';
      out += std::to_string(t);
    }
  }
  return out;
}

std::vector<int64_t> row_of(const Indices& x, int64_t row) {
  const int64_t t = x.shape[1];
  return std::vector<int64_t>(x.data.begin() + row * t, x.data.begin() + (row + 1) * t);
}

std::string percent(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << 100 * v << "%";
  return os.str();
}

std::string describe(const SequenceTaskOptions& task, const SequenceModelOptions& m, const TrainerOptions& t, int64_t params) {
  std::ostringstream os;
  os << "task   " << sequence_task_name(task.kind);
  if (task.kind == SequenceTaskKind::shift) os << " (k=" << task.shift << ")";
  os << ", vocab " << task.vocab_size << ", length " << task.seq_len << ", batch " << task.batch_size << ", seed "
     << task.seed << "\n"
     << "model  d_model " << m.d_model << ", " << m.n_head << " heads, d_ff " << m.d_ff << ", " << m.n_layers
     << " layers, " << (m.norm_first ? "pre-norm" : "post-norm") << ", " << positional_kind_name(m.positional)
     << " positions, dropout " << m.dropout << ", " << params << " parameters\n"
     << "train  " << optimizer_kind_name(t.optimizer) << " lr " << t.lr << " (warm-up " << t.warmup_steps << ", "
     << lr_decay_name(t.schedule) << " to " << t.min_lr << "), weight decay " << t.weight_decay << ", clip "
     << t.clip_norm << ", budget " << t.steps << " steps, target " << percent(t.target_seq_acc) << " exact, "
     << t.threads << (t.threads == 1 ? " thread" : " threads") << "\n";
  return os.str();
}

int run(const TrainSequenceArgs& args) {
  Communicator& comm = Communicator::world();  // under mpirun: this rank of a data-parallel run
  print_on_root_only(comm);
  SequenceModelOptions model_options = args.model;
  SequenceTaskOptions task = args.task;
  TrainerOptions trainer_options = args.trainer;
  if (!args.resume_path.empty()) {
    // The run's configuration comes from the checkpoint; only what observes it from the flags.
    const CheckpointConfig config = read_checkpoint_config(args.resume_path);
    model_options = config.model;
    task = config.task;
    trainer_options = config.trainer;
    trainer_options.eval_every = args.trainer.eval_every;
    trainer_options.eval_sequences = args.trainer.eval_sequences;
    trainer_options.target_seq_acc = args.trainer.target_seq_acc;
    trainer_options.threads = args.trainer.threads;
  } else {
    manual_seed(args.seed);  // parameters are drawn from the default generator
  }
  trainer_options.communicator = &comm;

  const std::string run_dir = std::string("runs/") + sequence_task_name(task.kind);
  TrainerOutputs outputs;
  outputs.log_path = args.log_path.empty() ? run_dir + "/metrics.jsonl" : args.log_path;
  outputs.plot_path = args.plot_path.empty() ? run_dir + "/plot.svg" : args.plot_path;
  outputs.checkpoint_path = args.save_path;
  // Before anything is built or trained: the outputs can be written and destroy nothing, and
  // the model, its optimizer and its activations fit in memory.
  // The run's configuration goes beside its metrics log, so that `--config` of it repeats the run.
  const std::filesystem::path log_dir = std::filesystem::path(outputs.log_path).parent_path();
  const std::string config_copy = (log_dir.empty() ? std::filesystem::path("config.toml") : log_dir / "config.toml").string();
  // Over several processes rank 0 alone writes them; the others only train and evaluate.
  if (comm.is_root()) {
    prepare_outputs({{"--save", outputs.checkpoint_path, OutputKind::checkpoint},
                     {"--log", outputs.log_path, OutputKind::metrics_log},
                     {"--plot", outputs.plot_path, OutputKind::plot},
                     {"the configuration copy", config_copy, OutputKind::config}},
                    {.resume = args.resume_path, .overwrite = args.overwrite});
  } else {
    outputs.log_path.clear();
    outputs.plot_path.clear();
    outputs.checkpoint_path.clear();
  }
  check_memory_fits(estimate_training_memory(model_options, task, trainer_options), available_memory_bytes(),
                    args.resume_path.empty()
                        ? "the size is driven by --d-model, --d-ff, --layers and --vocab (parameters and optimizer "
                          "state) and by --batch, --length and --heads (activations)"
                        : "the checkpoint's model and task settings are too large for this machine");
  std::ostringstream title;
  title << sequence_task_name(task.kind) << ": vocab " << task.vocab_size << ", length " << task.seq_len << ", d_model "
        << model_options.d_model << ", " << model_options.n_layers << " layers, " << optimizer_kind_name(trainer_options.optimizer)
        << " lr " << trainer_options.lr;
  outputs.plot_title = title.str();
  if (!args.quiet) {
    outputs.progress = &std::cout;
    // Under mpirun rank 0 writes to a pty even when mpirun's output goes to a file: no redrawing.
    outputs.interactive = stdout_is_terminal() && comm.size() == 1;
  }

  // A resume keeps the run's own.
  if (args.resume_path.empty() && comm.is_root()) write_file_atomically(config_copy, args.config_text);

  SequenceModel model(model_options);
  Trainer trainer(model, task, trainer_options, outputs);
  if (!args.resume_path.empty()) {
    trainer.resume(args.resume_path);
    std::cout << "resumed " << args.resume_path << " at step " << trainer.step() << "\n";
  }
  std::cout << describe(task, model_options, trainer_options, model.num_parameters()) << std::flush;

  g_trainer = &trainer;
  std::signal(SIGINT, on_interrupt);
  const TrainSummary s = trainer.run();
  std::signal(SIGINT, SIG_DFL);
  g_trainer = nullptr;

  std::cout << "\n"
            << (s.reached_target  ? "reached the target"
                : s.interrupted   ? "interrupted"
                                  : "step budget used up, target not reached")
            << " after " << s.steps << " steps (" << s.steps_this_run << " in this session) in "
            << format_duration(s.run_s) << " (" << format_rate(s.tokens_per_s) << " tokens/s)";
  if (s.elapsed_s > s.run_s + 0.05) std::cout << ", " << format_duration(s.elapsed_s) << " over all sessions";
  std::cout << "\nheld-out (" << s.eval.sequences << " sequences): loss " << std::setprecision(4) << s.eval.loss()
            << ", token accuracy " << percent(s.eval.token_accuracy()) << ", exact-sequence accuracy "
            << percent(s.eval.sequence_accuracy()) << "\n";
  if (const DataParallel* dp = trainer.data_parallel()) std::cout << dp->report() << "\n";

  // A few held-out examples: the first rows of the first held-out batch.
  const SequenceTask& t = trainer.task();
  const SequenceBatch examples = t.eval_batch(0);
  const Indices predicted = trainer.predict(examples.inputs);
  const int64_t shown = std::min<int64_t>(4, examples.inputs.shape[0]);
  std::cout << "examples (input -> predicted, expected):\n";
  for (int64_t r = 0; r < shown; ++r) {
    const std::vector<int64_t> p = row_of(predicted, r), e = row_of(examples.targets, r);
    std::cout << "  " << format_tokens(row_of(examples.inputs, r), task.vocab_size) << " -> "
              << format_tokens(p, task.vocab_size) << "  " << (p == e ? "ok " : "BAD") << "  "
              << format_tokens(e, task.vocab_size) << "\n";
  }
  std::cout << "metrics " << outputs.log_path << "\nplot    " << outputs.plot_path << "\n";
  if (!outputs.checkpoint_path.empty()) {
    std::cout << "checkpoint " << outputs.checkpoint_path << " (continue with --resume " << outputs.checkpoint_path
              << ")\n";
  }
  return s.interrupted ? 130 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ag::training_program_main<ag::TrainSequenceArgs>(argc, argv, "train_sequence", ag::parse_train_sequence_args, ag::train_sequence_usage, run);
}
