// Seq2SeqTrainer: the loop that trains an encoder-decoder (models/seq2seq.h) on a generated
// variable-length task (train/seq2seq_tasks.h) until it decodes held-out sources exactly.
//
//   manual_seed(seed);                                   // the model's initialisation
//   Seq2Seq model(model_options);                        // vocab and max_len fit the task
//   Seq2SeqTrainer trainer(model, task_options, {.lr = 1e-3, .steps = 3000}, outputs);
//   Seq2SeqTrainSummary summary = trainer.run();         // until the target accuracy or the budget
//
// One update (train_step), for update number n = step() + 1:
//   default_generator().set_step(n)   dropout masks are a function of (seed, n, call)
//   batch = task.train_batch(n - 1)   padded to its longest source and target
//   loss  = cross_entropy(model(src, src_lengths, tgt_in, tgt_lengths), tgt_out)
//           the mean over the real target tokens (padding is kSeq2SeqIgnore)
//   backward, clip_grad_norm (clip_norm > 0), optimizer at lr = schedule.at(n - 1)
// The batch and the masks depend on nothing but (seed, n), so a run resumed from its checkpoint
// makes the very updates of an uninterrupted run, bit for bit on the same thread count.
//
// Evaluation (every eval_every updates, at the last one, and before the first of a fresh run)
// runs on a fixed held-out set of eval_sequences sources:
//   teacher-forced  the loss and the token accuracy over the real target tokens, as in training;
//   decoded         greedy decoding from bos (models/seq2seq_decode.h), the encoder run once per
//                   source and the decoder's keys and values cached; a source counts as exact
//                   when the output is its target token for token and ends with eos.
// The exact-match rate of the decoded outputs is the metrics row's seq_acc and what
// target_seq_acc is compared with: what a user of the model gets, not the teacher-forced
// score (which sees the true previous tokens and so overstates it).
//
// Checkpoints hold parameters, optimizer state, the generator state, the data position and, in
// the metadata, "model_kind" ("seq2seq"), "seq2seq" (the model options), "seq2seq_task",
// "trainer" (the options that shape the trajectory) and "loop" (metrics window, clock).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attograd/models/seq2seq.h"
#include "attograd/models/seq2seq_decode.h"
#include "attograd/train/optim.h"
#include "attograd/train/run_clock.h"
#include "attograd/train/schedule.h"
#include "attograd/train/seq2seq_tasks.h"
#include "attograd/train/trainer.h"
#include "attograd/train/update.h"

namespace ag {

// The model kind marker a Seq2Seq checkpoint carries under "model_kind".
inline constexpr const char* kSeq2SeqModelKind = "seq2seq";

// What an evaluation on held-out sources found.
struct Seq2SeqMetrics {
  SequenceMetrics teacher;  // teacher-forced loss, token and sequence accuracy (real tokens only)
  int64_t sequences = 0;    // sources decoded
  int64_t exact = 0;        // decoded to their target exactly, eos included
  double decode_s = 0;      // wall time of the decoding

  double exact_accuracy() const;   // exact / sequences, in [0, 1]
  double sequences_per_s() const;  // decoded sources per second of decoding
};

struct Seq2SeqTrainSummary {
  int64_t steps = 0;  // updates done, resumed ones included
  int64_t steps_this_run = 0;
  bool reached_target = false;
  bool interrupted = false;  // request_stop() ended the run
  Seq2SeqMetrics eval;       // the last evaluation
  double elapsed_s = 0;      // wall time, earlier sessions included
  double run_s = 0;          // wall time of this call
  double tokens_per_s = 0;   // real (unpadded) source and target tokens per second of training
};

class Seq2SeqTrainer {
 public:
  // The model must outlive the trainer and fit the task: src_vocab == tgt_vocab ==
  // task.vocab_size() and max_len >= the longest source and the longest target plus eos
  // (std::invalid_argument naming both). Validates the options; runs in one process
  // (a communicator of more than one process is refused).
  Seq2SeqTrainer(Seq2Seq& model, const Seq2SeqTaskOptions& task, const TrainerOptions& options,
                 TrainerOutputs outputs = {});
  ~Seq2SeqTrainer();
  Seq2SeqTrainer(const Seq2SeqTrainer&) = delete;
  Seq2SeqTrainer& operator=(const Seq2SeqTrainer&) = delete;

  // One update; a diverged step throws TrainingDiverged before the parameters change.
  StepResult train_step();
  // Teacher-forced metrics and greedy exact match on the held-out set (eval mode, no graph).
  Seq2SeqMetrics evaluate();
  // Decodes the first `sources` held-out sources (all of them when 0 or more) with greedy
  // decoding (options.beam is ignored) or beam search; teacher is left empty.
  Seq2SeqMetrics decode_held_out(const Seq2SeqDecodeOptions& options, bool beam, int64_t sources = 0);
  // The decoding options of this task: its bos and eos, max_tokens its longest target plus eos.
  Seq2SeqDecodeOptions decode_options() const;

  Seq2SeqTrainSummary run();
  // Ends run() after the current update (it then saves). Safe from a signal handler.
  void request_stop() { stop_requested_.store(true); }

  void save_checkpoint(const std::string& path) const;
  // Continues the run saved in `path`: its model, task and trainer options must be this
  // trainer's (std::runtime_error naming the file and both values otherwise).
  void resume(const std::string& path);

  int64_t step() const { return step_; }
  const TrainerOptions& options() const { return options_; }
  const Seq2SeqTask& task() const { return task_; }
  // The held-out set, in batches of at most 256 sources.
  const std::vector<Seq2SeqBatch>& held_out() const { return held_out_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  Seq2Seq& model() { return model_; }

 private:
  std::map<std::string, std::string> metadata() const;

  Seq2Seq& model_;
  Seq2SeqTask task_;
  std::vector<Seq2SeqBatch> held_out_;
  TrainerOptions options_;
  TrainerOutputs outputs_;
  NamedVariables params_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  int64_t step_ = 0;
  int64_t last_batch_tokens_ = 0;  // real source and target tokens of the last update's batch
  bool resumed_ = false;
  double window_loss_sum_ = 0;
  int64_t window_steps_ = 0;
  DivergenceGuard guard_;
  RunClock clock_;
  std::atomic<bool> stop_requested_{false};
};

// A Seq2Seq checkpoint's configuration, to rebuild the model and trainer before resume().
// std::runtime_error naming the file when it is not a Seq2Seq checkpoint (and what it holds
// instead) or when an entry is missing or does not parse.
struct Seq2SeqCheckpointConfig {
  Seq2SeqOptions model;
  Seq2SeqTaskOptions task;
  TrainerOptions trainer;  // trajectory options from the file, the rest defaulted
  int64_t step = 0;
};
Seq2SeqCheckpointConfig read_seq2seq_checkpoint_config(const std::string& path);

// The target content of row `row` of a batch: tgt_out up to (not including) its eos.
std::vector<int64_t> target_of(const Seq2SeqBatch& batch, int64_t row);
// The source of row `row`, without its padding.
std::vector<int64_t> source_of(const Seq2SeqBatch& batch, int64_t row);

}  // namespace ag
