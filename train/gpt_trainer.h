// GPTTrainer: the loop that trains a GPT as a language model on a stream of tokens.
//
//   manual_seed(options.seed);                             // the model's initialisation
//   GPT model(gpt_options);                                // vocab = tokenizer.vocab_size()
//   GPTTrainer trainer(model, tokenizer, tokenizer.encode(text), options, outputs);
//   GPTTrainSummary summary = trainer.run();               // until the step budget or request_stop()
//
// The tokens are split once, the first train_fraction for training and the rest for validation
// (split_tokens). One update (train_step), for update number n = step() + 1:
//   default_generator().set_step(n)       dropout masks are a function of (seed, n, call)
//   batch = sample_batch(train, seed, n-1) random windows, a pure function of (seed, step)
//   loss  = cross_entropy(logits (B, T, V), targets (B, T))
//   backward, clip_grad_norm (clip_norm > 0), AdamW at lr = schedule.at(n - 1) (warm-up, cosine)
// Since neither the batch nor the masks depend on anything but (seed, step), a run stopped and
// resumed from its checkpoint makes the very updates of an uninterrupted run, bit for bit on
// the same thread count (tests/train/test_gpt_trainer.cpp).
//
// Every eval_every updates and at the last one, run() computes the validation loss over the
// same fixed windows (eval_batches), appends a metrics row (train loss since the last row,
// validation loss, lr, gradient norm, tokens/s), redraws the plot, prints a short sample from a
// fixed prompt (seeded, so two runs print the same text) and saves the checkpoint.
//
// Checkpoints hold the parameters (the tied embedding / head weight once, as embed.weight), the
// AdamW state, the default generator's state, the step, and in the metadata: "model_kind"
// ("gpt"), "gpt" (gpt_options_to_json), "tokenizer" (Tokenizer::to_json, so generation needs no
// data file), "gpt_trainer" (the options that shape the trajectory), "data" (the token count
// and a checksum of the tokens, so a resume on another text is refused) and "loop" (the metrics
// window, the elapsed time, the starting loss).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "attograd/models/gpt.h"
#include "attograd/train/checkpoint.h"
#include "attograd/train/optim.h"
#include "attograd/train/run_clock.h"
#include "attograd/train/schedule.h"
#include "attograd/train/text.h"
#include "attograd/train/trainer.h"

namespace ag {

// The model kind marker a GPT checkpoint carries under "model_kind".
inline constexpr const char* kGPTModelKind = "gpt";

struct GPTTrainerOptions {
  // What the trajectory depends on: stored in checkpoints and required to match on resume.
  int64_t batch = 32;          // windows per step (each block_size tokens long)
  double lr = 1e-3;            // peak learning rate of AdamW, after warm-up
  double min_lr = 1e-4;        // reached at `steps` by the cosine decay
  double weight_decay = 0.1;   // decoupled (AdamW)
  int64_t warmup_steps = 100;
  int64_t steps = 2000;        // the step budget and the end of the decay
  double clip_norm = 1.0;      // max global gradient norm; 0 turns clipping off
  uint64_t seed = 0;           // the batches; the caller seeds init and dropout with manual_seed
  double train_fraction = 0.9; // of the tokens for training, the rest validates
  // What only observes the run.
  int64_t eval_every = 100;
  int64_t eval_windows = 64;       // validation windows per evaluation (at most)
  int64_t sample_tokens = 100;     // printed at every evaluation; 0 prints none
  std::string sample_prompt = "\n";  // tokens the sample continues; see GPTTrainer
  int threads = 1;                 // ag::set_num_threads at construction
  // The processes of a data-parallel run (train/data_parallel.h); null, or a world of one,
  // trains alone. Each rank trains on its batch / N rows of every batch and evaluates its part
  // of every validation batch.
  Communicator* communicator = nullptr;
};

// Throws std::invalid_argument naming the first bad option and its value (bounds: TrainerLimits).
void validate(const GPTTrainerOptions& options);
// The trajectory options (the first group) as JSON and back into `base`, whose observing options
// are kept. Parsing checks every field and validates; std::invalid_argument otherwise.
std::string gpt_trainer_options_to_json(const GPTTrainerOptions& options);
GPTTrainerOptions gpt_trainer_options_from_json(const std::string& json, const GPTTrainerOptions& base = {});

struct GPTTrainerOutputs {
  std::ostream* progress = nullptr;  // progress lines, evaluations and samples; null is silent
  bool interactive = false;          // redraw the progress line in place
  std::string checkpoint_path{};       // saved at every evaluation and when the run stops
  std::string log_path{};              // metrics, one JSON line per evaluation
  std::string plot_path{};             // SVG of the metrics (needs log_path)
  std::string plot_title = "GPT language model";
  std::function<void(int64_t step, double loss)> on_step{};  // after every update
};

struct GPTTrainSummary {
  int64_t steps = 0;  // updates done, resumed ones included
  int64_t steps_this_run = 0;
  bool interrupted = false;    // request_stop() ended the run
  double train_loss = std::numeric_limits<double>::quiet_NaN();  // mean over the last metrics window
  double val_loss = std::numeric_limits<double>::quiet_NaN();    // the last evaluation
  std::string sample;          // the last sample's text
  double elapsed_s = 0;        // wall time, earlier sessions included
  double run_s = 0;            // wall time of this call
  double tokens_per_s = 0;     // training tokens per second of training time in this call
};

class GPTTrainer {
 public:
  // The model must outlive the trainer and have vocab == tokenizer.vocab_size(). Validates the
  // options and checks that both parts of the split hold at least block_size + 1 tokens
  // (std::invalid_argument naming both numbers). The sample prompt is encoded with the
  // tokenizer; a prompt it cannot encode falls back to the first training token.
  GPTTrainer(GPT& model, Tokenizer tokenizer, const std::vector<int64_t>& tokens, const GPTTrainerOptions& options,
             GPTTrainerOutputs outputs = {});
  ~GPTTrainer();
  GPTTrainer(const GPTTrainer&) = delete;
  GPTTrainer& operator=(const GPTTrainer&) = delete;

  // One update. A non-finite loss or gradient norm, or a loss above kDivergenceFactor times the
  // starting loss, throws TrainingDiverged before the parameters change.
  StepResult train_step();
  // Mean cross-entropy per token over the validation windows, in eval mode, without a graph.
  double evaluate();
  // sample_tokens tokens continuing the sample prompt (temperature 0.8, top-k 40, seed `seed`),
  // decoded; the model's mode and the default generator are left as they were.
  std::string sample();

  GPTTrainSummary run();
  // Ends run() after the current update (it then saves). Safe from a signal handler.
  void request_stop() { stop_requested_.store(true); }

  void save_checkpoint(const std::string& path) const;
  // Continues the run saved in `path`: its model, tokenizer, trajectory options and data must be
  // this trainer's (std::runtime_error naming the file and both values otherwise).
  void resume(const std::string& path);

  int64_t step() const { return step_; }
  const GPTTrainerOptions& options() const { return options_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const TextSplit& data() const { return data_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  GPT& model() { return model_; }
  // The gradient average of a run over several processes; null in one process.
  const DataParallel* data_parallel() const { return data_parallel_.get(); }

 private:
  std::map<std::string, std::string> metadata() const;

  GPT& model_;
  Tokenizer tokenizer_;
  GPTTrainerOptions options_;
  GPTTrainerOutputs outputs_;
  TextSplit data_;
  std::string data_json_;  // {"tokens": n, "crc32c": c} of all the tokens
  std::vector<TextBatch> eval_;
  std::vector<int64_t> prompt_;
  NamedVariables params_;
  std::unique_ptr<AdamW> optimizer_;
  LrSchedule schedule_;
  std::unique_ptr<DataParallel> data_parallel_;  // over several processes only
  Shard shard_;                                  // this rank's rows of every training batch
  int64_t step_ = 0;
  bool resumed_ = false;
  double window_loss_sum_ = 0;
  int64_t window_steps_ = 0;
  DivergenceGuard guard_;  // the starting loss, the last saved step, what a divergence message says
  RunClock clock_;  // the run's wall time, earlier sessions included
  std::atomic<bool> stop_requested_{false};
};

// What a checkpoint holds, by its "model_kind": "gpt" for GPTTrainer's, "sequence" for the toy
// Trainer's (which has no marker but its "task" entry), "unknown" otherwise.
std::string checkpoint_model_kind(const CheckpointInfo& info);

// A GPT checkpoint's configuration, to rebuild the model and trainer before resume().
// std::runtime_error naming the file when it is not a GPT checkpoint (and what it holds instead)
// or when an entry is missing or does not parse.
struct GPTCheckpointConfig {
  GPTOptions model;
  Tokenizer tokenizer;
  GPTTrainerOptions trainer;  // trajectory options from the file, the rest defaulted
  int64_t step = 0;
};
GPTCheckpointConfig read_gpt_checkpoint_config(const std::string& path);

// A trained model for generation: built from the checkpoint's options with its parameters
// loaded (the optimizer state is ignored), in eval mode. Same errors as above.
struct LoadedGPT {
  std::unique_ptr<GPT> model;
  Tokenizer tokenizer;
  int64_t step = 0;
};
LoadedGPT load_gpt_checkpoint(const std::string& path);

}  // namespace ag
