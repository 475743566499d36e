// train_seq2seq: trains an encoder-decoder transformer on a generated task of variable-length
// sequences and decodes held-out sources with greedy decoding or beam search.
//
//   build/examples/train_seq2seq                        # reverse-var, to 99% exact held-out outputs
//   build/examples/train_seq2seq --task addition --beam 4
//   build/examples/train_seq2seq --task dedup --save runs/dedup/ckpt.safetensors
//   build/examples/train_seq2seq --resume runs/dedup/ckpt.safetensors
//
// Writes the metrics log (JSON lines) and an SVG plot under runs/<task>/ unless --log / --plot
// say otherwise, and the run's configuration beside them. Ctrl-C stops after the current step
// and saves the checkpoint (with --save), so the run can be resumed. At the end it decodes the
// held-out sources (greedy, and with --beam N also beam search), reports exact-match rates and
// decoding speed, and shows a few examples. Exit codes: 0 done, 1 error, 2 bad command line,
// 130 interrupted.
#include <csignal>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "attograd/core/rng.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/outputs.h"
#include "attograd/train/report/progress.h"
#include "attograd/train/seq2seq_trainer.h"
#include "program_main.h"
#include "train_seq2seq_cli.h"

namespace {

using namespace ag;

Seq2SeqTrainer* g_trainer = nullptr;

// First Ctrl-C: finish the step, save, stop. A second one kills the program as usual.
extern "C" void on_interrupt(int) {
  std::signal(SIGINT, SIG_DFL);
  if (g_trainer != nullptr) g_trainer->request_stop();
}

std::string percent(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << 100 * v << "%";
  return os.str();
}

std::string describe(const Seq2SeqTaskOptions& task, const Seq2SeqOptions& m, const TrainerOptions& t, int64_t params) {
  std::ostringstream os;
  os << "task   " << seq2seq_task_name(task.kind);
  if (task.kind == Seq2SeqTaskKind::addition) {
    os << ", " << task.min_len << " to " << task.max_len << " digits per operand";
  } else {
    os << ", " << task.symbols << " symbols, length " << task.min_len << " to " << task.max_len;
  }
  os << ", batch " << task.batch_size << ", seed " << task.seed << "\n"
     << "model  d_model " << m.d_model << ", " << m.n_head << " heads, d_ff " << m.d_ff << ", " << m.n_encoder_layers
     << "+" << m.n_decoder_layers << " layers, " << (m.norm_first ? "pre-norm" : "post-norm") << ", "
     << positional_kind_name(m.positional) << " positions, dropout " << m.dropout << ", " << params << " parameters\n"
     << "train  " << optimizer_kind_name(t.optimizer) << " lr " << t.lr << " (warm-up " << t.warmup_steps << ", "
     << lr_decay_name(t.schedule) << " to " << t.min_lr << "), clip " << t.clip_norm << ", budget " << t.steps
     << " steps, target " << percent(t.target_seq_acc) << " exact (greedy), " << t.threads
     << (t.threads == 1 ? " thread" : " threads") << "\n";
  return os.str();
}

std::string decoding_line(const char* name, const Seq2SeqMetrics& m) {
  std::ostringstream os;
  os << name << ": exact " << percent(m.exact_accuracy()) << " of " << m.sequences << ", " << std::fixed
     << std::setprecision(1) << m.sequences_per_s() << " sequences/s";
  return os.str();
}

int run(const TrainSeq2SeqArgs& args) {
  Seq2SeqOptions model_options = args.model;
  Seq2SeqTaskOptions task = args.task;
  TrainerOptions trainer_options = args.trainer;
  if (!args.resume_path.empty()) {
    // The run's configuration comes from the checkpoint; only what observes it from the flags.
    const Seq2SeqCheckpointConfig config = read_seq2seq_checkpoint_config(args.resume_path);
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

  const std::string run_dir = std::string("runs/") + seq2seq_task_name(task.kind);
  TrainerOutputs outputs;
  outputs.log_path = args.log_path.empty() ? run_dir + "/metrics.jsonl" : args.log_path;
  outputs.plot_path = args.plot_path.empty() ? run_dir + "/plot.svg" : args.plot_path;
  outputs.checkpoint_path = args.save_path;
  // The run's configuration goes beside its metrics log, so that `--config` of it repeats the run.
  const std::filesystem::path log_dir = std::filesystem::path(outputs.log_path).parent_path();
  const std::string config_copy = (log_dir.empty() ? std::filesystem::path("config.toml") : log_dir / "config.toml").string();
  // Before anything is built or trained: the outputs can be written and destroy nothing.
  prepare_outputs({{"--save", outputs.checkpoint_path, OutputKind::checkpoint},
                   {"--log", outputs.log_path, OutputKind::metrics_log},
                   {"--plot", outputs.plot_path, OutputKind::plot},
                   {"the configuration copy", config_copy, OutputKind::config}},
                  {.resume = args.resume_path, .overwrite = args.overwrite});
  std::ostringstream title;
  title << seq2seq_task_name(task.kind) << ": lengths " << task.min_len << "-" << task.max_len << ", d_model "
        << model_options.d_model << ", " << model_options.n_encoder_layers << "+" << model_options.n_decoder_layers
        << " layers, " << optimizer_kind_name(trainer_options.optimizer) << " lr " << trainer_options.lr;
  outputs.plot_title = title.str();
  if (!args.quiet) {
    outputs.progress = &std::cout;
    outputs.interactive = stdout_is_terminal();
  }
  if (args.resume_path.empty()) write_file_atomically(config_copy, args.config_text);  // a resume keeps the run's own

  Seq2Seq model(model_options);
  Seq2SeqTrainer trainer(model, task, trainer_options, outputs);
  if (!args.resume_path.empty()) {
    trainer.resume(args.resume_path);
    std::cout << "resumed " << args.resume_path << " at step " << trainer.step() << "\n";
  }
  std::cout << describe(task, model_options, trainer_options, model.num_parameters()) << std::flush;

  g_trainer = &trainer;
  std::signal(SIGINT, on_interrupt);
  const Seq2SeqTrainSummary s = trainer.run();
  std::signal(SIGINT, SIG_DFL);
  g_trainer = nullptr;

  std::cout << "\n"
            << (s.reached_target  ? "reached the target"
                : s.interrupted   ? "interrupted"
                                  : "step budget used up, target not reached")
            << " after " << s.steps << " steps (" << s.steps_this_run << " in this session) in "
            << format_duration(s.run_s) << " (" << format_rate(s.tokens_per_s) << " tokens/s)";
  if (s.elapsed_s > s.run_s + 0.05) std::cout << ", " << format_duration(s.elapsed_s) << " over all sessions";
  std::cout << "\nheld-out (" << s.eval.sequences << " sources): loss " << std::setprecision(4) << s.eval.teacher.loss()
            << ", token accuracy " << percent(s.eval.teacher.token_accuracy()) << " (teacher-forced)\n";

  // The final decoding of the held-out set, timed: greedy in batches, beam search source by source.
  Seq2SeqDecodeOptions decode = trainer.decode_options();
  decode.beam = args.beam;
  decode.length_penalty = args.length_penalty;
  const Seq2SeqMetrics greedy = trainer.decode_held_out(decode, /*beam=*/false);
  std::cout << decoding_line("greedy", greedy) << "\n";
  Seq2SeqMetrics beam;
  if (args.beam > 1) {
    const std::string name = "beam " + std::to_string(args.beam);
    beam = trainer.decode_held_out(decode, /*beam=*/true);
    std::cout << decoding_line(name.c_str(), beam) << "\n";
  }

  // A few held-out examples, decoded the way the final line above did.
  const Seq2SeqBatch& held_out = trainer.held_out().front();
  const int64_t shown = std::min<int64_t>(5, held_out.src.shape[0]);
  Seq2SeqBatch first;
  {
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> examples;
    for (int64_t r = 0; r < shown; ++r) examples.emplace_back(source_of(held_out, r), target_of(held_out, r));
    first = pad_batch(examples);
  }
  const std::vector<Hypothesis> out = args.beam > 1 ? beam_search(model, first.src, first.src_lengths, decode)
                                                    : greedy_decode(model, first.src, first.src_lengths, decode);
  const Seq2SeqTask& t = trainer.task();
  std::cout << "examples (source -> decoded, expected):\n";
  for (int64_t r = 0; r < shown; ++r) {
    const Hypothesis& h = out[static_cast<size_t>(r)];
    const std::vector<int64_t> expected = target_of(first, r);
    const bool ok = h.ended && h.tokens == expected;
    std::cout << "  " << t.to_text(source_of(first, r)) << " -> " << t.to_text(h.tokens) << (h.ended ? "" : " (no eos)")
              << "  " << (ok ? "ok " : "BAD") << "  " << t.to_text(expected) << "\n";
  }
  std::cout << "metrics " << outputs.log_path << "\nplot    " << outputs.plot_path << "\n";
  if (!outputs.checkpoint_path.empty()) {
    std::cout << "checkpoint " << outputs.checkpoint_path << " (continue with --resume " << outputs.checkpoint_path
              << ")\n";
  }
  if (args.json) {
    // One line for scripts: the run (run_s counts its evaluations too) and the final decoding.
    std::cout << std::setprecision(17) << "{\"steps\": " << s.steps << ", \"reached\": " << (s.reached_target ? "true" : "false")
              << ", \"train_s\": " << s.run_s << ", \"seq_acc\": " << greedy.exact_accuracy()
              << ", \"greedy_seq_per_s\": " << greedy.sequences_per_s() << ", \"beam\": " << args.beam;
    if (args.beam > 1) {
      std::cout << ", \"beam_seq_per_s\": " << beam.sequences_per_s() << ", \"beam_seq_acc\": " << beam.exact_accuracy();
    }
    std::cout << "}\n";
  }
  return s.interrupted ? 130 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ag::training_program_main<ag::TrainSeq2SeqArgs>(argc, argv, "train_seq2seq", ag::parse_train_seq2seq_args,
                                                         ag::train_seq2seq_usage, run);
}
