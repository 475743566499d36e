// Trainer: the loop that trains a SequenceModel on a toy SequenceTask.
//
//   manual_seed(seed);                                   // the model's initialisation
//   SequenceModel model(model_options);
//   Trainer trainer(model, task_options, {.lr = 3e-3, .steps = 2000}, outputs);
//   TrainSummary summary = trainer.run();                // until the target accuracy or the budget
//
// One update (train_step), for update number n = step() + 1:
//   default_generator().set_step(n)   dropout masks are a function of (seed, n, call), so a
//                                     replayed update draws the same masks; the streams of step 0
//                                     are left to the initialisers
//   batch  = task.train_batch(n - 1)  the data position is the number of updates done
//   loss   = cross_entropy(model(batch.inputs), batch.targets)          logits (B, T, V)
//   backward, clip_grad_norm (when clip_norm > 0), optimizer lr = schedule.at(n - 1), step
// Every eval_every updates, and at the last one, run() evaluates on eval_sequences held-out
// sequences (loss, token and exact-sequence accuracy), appends a metrics row, redraws the plot,
// saves the checkpoint, and stops once the exact-sequence accuracy reaches target_seq_acc. A
// fresh run also evaluates before its first update (row 0, the untrained baseline).
//
// Checkpoints (train/checkpoint.h) hold parameters, optimizer state, the generator state, the
// data position and, as JSON in the metadata, "model", "task" and "trainer" (the options that
// shape the trajectory) plus "loop" (the running sums of the current metrics window and the
// elapsed time). resume() restores all of it, so that on the same thread count the updates after
// a resume are bit for bit those of the uninterrupted run (tests/train/test_trainer.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

#include "attograd/core/indices.h"
#include "attograd/models/sequence_model.h"
#include "attograd/train/clip.h"
#include "attograd/train/communicator.h"
#include "attograd/train/data_parallel.h"
#include "attograd/train/metrics_log.h"
#include "attograd/train/optim.h"
#include "attograd/train/run_clock.h"
#include "attograd/train/schedule.h"
#include "attograd/train/tasks.h"
#include "attograd/train/update.h"

namespace ag {

enum class OptimizerKind { sgd, adam, adamw };
const char* optimizer_kind_name(OptimizerKind kind);  // "sgd", "adam", "adamw"
// Inverse of optimizer_kind_name; std::invalid_argument listing the choices otherwise.
OptimizerKind parse_optimizer_kind(const std::string& name);

struct TrainerOptions {
  // What the trajectory depends on: stored in checkpoints and required to match on resume.
  OptimizerKind optimizer = OptimizerKind::adam;
  double lr = 5e-3;            // peak learning rate (after warm-up)
  double min_lr = 0.0;         // reached at `steps` by cosine and linear decay
  double weight_decay = 0.0;   // L2 for SGD and Adam, decoupled for AdamW
  double momentum = 0.9;       // SGD only
  int64_t warmup_steps = 30;
  LrDecay schedule = LrDecay::cosine;
  int64_t steps = 1000;        // the step budget, and the end of the decay
  double clip_norm = 1.0;      // max global gradient norm; 0 turns clipping off
  // What only observes the run.
  int64_t eval_every = 10;
  int64_t eval_sequences = 512;  // held-out sequences per evaluation
  double target_seq_acc = 0.99;  // stop at the first evaluation that reaches it; > 1 never stops
  int threads = 1;               // ag::set_num_threads at construction
  // The processes of a data-parallel run (train/data_parallel.h); null, or a world of one,
  // trains in this process alone. Each rank trains on its shard of task.batch_size rows.
  Communicator* communicator = nullptr;
};

// Upper bounds shared by the command line and checkpoint metadata.
struct TrainerLimits {
  static constexpr int64_t steps = int64_t{1} << 31;  // also bounds warmup_steps and eval_every
  static constexpr double lr = 1e3;                   // also bounds min_lr and weight_decay
  static constexpr double clip_norm = 1e6;
  static constexpr int64_t eval_sequences = int64_t{1} << 20;
  static constexpr int threads = 256;
};

// Throws std::invalid_argument naming the first bad option and its value.
void validate(const TrainerOptions& options);

// The optimizer the options name, over `params`, at the options' lr and weight decay.
std::unique_ptr<Optimizer> make_optimizer(const NamedVariables& params, const TrainerOptions& options);

// The learning-rate schedule the options describe (warm-up, decay to min_lr at `steps`).
LrScheduleOptions schedule_options(const TrainerOptions& options);

// The trajectory-shaping options (the first group above) as JSON, and back into `base` (whose
// observing options are kept). Parsing checks every field; std::invalid_argument otherwise.
std::string trainer_options_to_json(const TrainerOptions& options);
TrainerOptions trainer_options_from_json(const std::string& json, const TrainerOptions& base = {});

// Where a run reports. Everything is optional.
struct TrainerOutputs {
  std::ostream* progress = nullptr;  // progress line and evaluation lines; null is silent
  bool interactive = false;          // redraw the progress line in place (stdout_is_terminal())
  std::string checkpoint_path{};     // saved at every evaluation and when the run stops
  std::string log_path{};            // metrics, one JSON line per evaluation
  std::string plot_path{};           // SVG of the metrics, rewritten at every evaluation
  std::string plot_title = "training run";
  std::function<void(int64_t step, double loss)> on_step{};  // after every update, e.g. to record losses
};

struct TrainSummary {
  int64_t steps = 0;            // updates done, resumed ones included
  int64_t steps_this_run = 0;
  bool reached_target = false;
  bool interrupted = false;     // request_stop() ended the run
  SequenceMetrics eval;         // the last evaluation (empty if there was none)
  double elapsed_s = 0;         // wall time, earlier sessions of a resumed run included
  double run_s = 0;             // wall time of this call
  double tokens_per_s = 0;      // training tokens per second of training time in this call
};

class Trainer {
 public:
  // The model must outlive the trainer. Validates the options (std::invalid_argument), checks
  // that the model fits the task (vocab, max_len >= seq_len) and sets the thread count.
  Trainer(SequenceModel& model, const TaskOptions& task, const TrainerOptions& options, TrainerOutputs outputs = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One update on the next training batch. A diverged step (see TrainingDiverged) throws,
  // naming the update, the loss, the gradient norm, the learning rate and the likely causes,
  // before the parameters change.
  StepResult train_step();
  // Held-out metrics, in eval mode and without a graph; the model's mode is restored.
  SequenceMetrics evaluate();
  // Argmax predictions, inputs (B, T) -> (B, T), in eval mode.
  Indices predict(const Indices& inputs);

  // Trains from step() until the target accuracy, the budget or request_stop().
  TrainSummary run();
  // Ends run() after the current update (it then saves the checkpoint). Safe from a signal handler.
  void request_stop() { stop_requested_.store(true); }

  void save_checkpoint(const std::string& path) const;
  // Continues the run saved in `path`. The file's model, task and trainer configuration must be
  // this trainer's (std::runtime_error naming the file and both values otherwise; build them
  // from read_checkpoint_info first). Restores parameters, optimizer state, the default
  // generator, the data position and the metrics window.
  void resume(const std::string& path);

  int64_t step() const { return step_; }
  const TrainerOptions& options() const { return options_; }
  const SequenceTask& task() const { return task_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  SequenceModel& model() { return model_; }
  // The gradient average of a run over several processes; null in one process.
  const DataParallel* data_parallel() const { return data_parallel_.get(); }

 private:
  std::map<std::string, std::string> metadata() const;

  SequenceModel& model_;
  SequenceTask task_;
  SequenceTask eval_task_;  // the task with the evaluation batch size
  int64_t eval_rows_ = 1;   // held-out rows per forward pass (train/memory.h)
  TrainerOptions options_;
  TrainerOutputs outputs_;
  NamedVariables params_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  std::unique_ptr<DataParallel> data_parallel_;  // over several processes only
  Shard shard_;                                  // this rank's rows of every training batch
  int64_t step_ = 0;
  bool resumed_ = false;
  // The current metrics window (since the last evaluation) and the time before this session.
  double window_loss_sum_ = 0;
  int64_t window_steps_ = 0;
  DivergenceGuard guard_;  // the starting loss, the last saved step, what a divergence message says
  RunClock clock_;  // the run's wall time, earlier sessions included
  std::atomic<bool> stop_requested_{false};
};

// The checkpoint's configuration, to rebuild the model, task and trainer before resume():
// std::runtime_error naming the file when a key is missing or does not parse.
struct CheckpointConfig {
  SequenceModelOptions model;
  TaskOptions task;
  TrainerOptions trainer;  // trajectory options from the file, the rest defaulted
  int64_t step = 0;
};
CheckpointConfig read_checkpoint_config(const std::string& path);

}  // namespace ag
