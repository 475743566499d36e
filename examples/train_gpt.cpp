// train_gpt: trains a small GPT language model on a text (by default Debian's fortunes, one token
// per character) and prints a sample at every evaluation, so you can watch it learn to spell.
//
//   build/examples/train_gpt                                  # the baby model, a few minutes
//   build/examples/train_gpt --data my.txt --steps 2000 --save runs/my/ckpt.safetensors
//   build/examples/train_gpt --resume runs/gpt/ckpt.safetensors
//   build/examples/generate --checkpoint runs/gpt/ckpt.safetensors --prompt "The "
//
// Writes the checkpoint, the metrics log (JSON lines) and an SVG plot under runs/gpt/ unless
// --save / --log / --plot say otherwise. Ctrl-C stops after the current step and saves, so the
// run can be resumed bit for bit. Exit codes: 0 done, 1 error, 2 bad command line or data too
// short for the context, 130 interrupted.
#include <csignal>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "attograd/core/rng.h"
#include "attograd/train/dist/communicator.h"
#include "attograd/train/gpt_trainer.h"
#include "attograd/train/io/outputs.h"
#include "attograd/train/report/progress.h"
#include "attograd/train/data/text.h"
#include "program_main.h"
#include "train_gpt_cli.h"

namespace {

using namespace ag;

GPTTrainer* g_trainer = nullptr;

// First Ctrl-C: finish the step, save, stop. A second one kills the program as usual.
extern "C" void on_interrupt(int) {
  std::signal(SIGINT, SIG_DFL);
  if (g_trainer != nullptr) g_trainer->request_stop();
}

std::string describe(const std::string& data, const Tokenizer& tok, const TextSplit& split, const GPTOptions& m,
                     const GPTTrainerOptions& t, int64_t params) {
  std::ostringstream os;
  os << "data   " << data << ": " << split.train.size() + split.val.size() << " tokens (" << split.train.size()
     << " train, " << split.val.size() << " validation), " << tok.kind_name() << " tokenizer, vocab "
     << tok.vocab_size() << "\n"
     << "model  GPT " << m.n_layers << " layers, " << m.n_head << " heads, d_model " << m.d_model << ", context "
     << m.block_size << ", dropout " << m.dropout << ", " << params << " parameters\n"
     << "train  AdamW lr " << t.lr << " (warm-up " << t.warmup_steps << ", cosine to " << t.min_lr
     << "), weight decay " << t.weight_decay << ", clip " << t.clip_norm << ", batch " << t.batch << ", "
     << t.steps << " steps, seed " << t.seed << ", " << t.threads << (t.threads == 1 ? " thread" : " threads") << "\n";
  return os.str();
}

int run(const TrainGPTArgs& args) {
  Communicator& comm = Communicator::world();  // under mpirun: this rank of a data-parallel run
  print_on_root_only(comm);
  GPTOptions model_options = args.model;
  GPTTrainerOptions trainer_options = args.trainer;
  const std::string data_name = args.data_path.empty() ? std::string(kFortunesDir) : args.data_path;
  const std::string text = read_corpus(args.data_path);
  Tokenizer tokenizer = Tokenizer::bytes();
  if (!args.resume_path.empty()) {
    // The run's configuration comes from the checkpoint; only what observes it from the flags.
    const GPTCheckpointConfig config = read_gpt_checkpoint_config(args.resume_path);
    model_options = config.model;
    tokenizer = config.tokenizer;
    trainer_options = config.trainer;
    trainer_options.eval_every = args.trainer.eval_every;
    trainer_options.threads = args.trainer.threads;
  } else {
    tokenizer = args.tokenizer == "char" ? Tokenizer::characters(text) : Tokenizer::bytes();
    model_options.vocab = tokenizer.vocab_size();
  }
  trainer_options.communicator = &comm;
  const std::vector<int64_t> tokens = tokenizer.encode(text);
  if (static_cast<int64_t>(tokens.size()) < model_options.block_size + 1) {
    std::cerr << "train_gpt: --data '" << data_name << "': the text is " << tokens.size()
              << " tokens long, shorter than --block-size " << model_options.block_size << " + 1 = "
              << model_options.block_size + 1 << " (give more text or lower --block-size)\n";
    return 2;
  }

  GPTTrainerOutputs outputs;
  outputs.checkpoint_path = args.save_path;
  outputs.log_path = args.log_path;
  outputs.plot_path = args.plot_path;
  // Before anything is trained: every output can be written, and none destroys a file of the user's.
  // Over several processes rank 0 alone writes them; the others only train and evaluate.
  if (comm.is_root()) {
    prepare_outputs({{"--save", outputs.checkpoint_path, OutputKind::checkpoint},
                     {"--log", outputs.log_path, OutputKind::metrics_log},
                     {"--plot", outputs.plot_path, OutputKind::plot}},
                    {.resume = args.resume_path, .overwrite = args.overwrite});
  } else {
    outputs.checkpoint_path.clear();
    outputs.log_path.clear();
    outputs.plot_path.clear();
  }
  std::ostringstream title;
  title << "GPT on " << std::filesystem::path(data_name).filename().string() << ": " << model_options.n_layers
        << " layers, d_model " << model_options.d_model << ", context " << model_options.block_size << ", lr "
        << trainer_options.lr;
  outputs.plot_title = title.str();
  if (!args.quiet) {
    outputs.progress = &std::cout;
    // Under mpirun rank 0 writes to a pty even when mpirun's output goes to a file: no redrawing.
    outputs.interactive = stdout_is_terminal() && comm.size() == 1;
  }

  if (args.resume_path.empty()) manual_seed(trainer_options.seed);  // the initial weights
  GPT model(model_options);
  GPTTrainer trainer(model, tokenizer, tokens, trainer_options, outputs);
  if (!args.resume_path.empty()) {
    trainer.resume(args.resume_path);
    std::cout << "resumed " << args.resume_path << " at step " << trainer.step() << "\n";
  }
  std::cout << describe(data_name, tokenizer, trainer.data(), model_options, trainer_options, model.num_parameters())
            << std::flush;

  g_trainer = &trainer;
  std::signal(SIGINT, on_interrupt);
  const GPTTrainSummary s = trainer.run();
  std::signal(SIGINT, SIG_DFL);
  g_trainer = nullptr;

  std::cout << "\n" << (s.interrupted ? "interrupted" : "done") << " after " << s.steps << " steps ("
            << s.steps_this_run << " in this session) in " << format_duration(s.run_s) << " ("
            << format_rate(s.tokens_per_s) << " tokens/s)";
  if (s.elapsed_s > s.run_s + 0.05) std::cout << ", " << format_duration(s.elapsed_s) << " over all sessions";
  std::cout << std::fixed << std::setprecision(4) << "\nfinal train loss " << s.train_loss << ", validation loss "
            << s.val_loss << " (nats per token)\n";
  if (const DataParallel* dp = trainer.data_parallel()) std::cout << dp->report() << "\n";
  std::cout << "metrics " << outputs.log_path << "\nplot    " << outputs.plot_path << "\n";
  std::cout << "checkpoint " << outputs.checkpoint_path << " (continue with --resume " << outputs.checkpoint_path
            << ", sample with generate --checkpoint " << outputs.checkpoint_path << ")\n";
  return s.interrupted ? 130 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ag::training_program_main<ag::TrainGPTArgs>(argc, argv, "train_gpt", ag::parse_train_gpt_args, ag::train_gpt_usage, run);
}
