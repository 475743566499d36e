// Trainer: the one training loop. Every model kind trains through it; what differs between
// kinds is a small TrainingJob (train/job.h).
//
//   manual_seed(seed);                                     // the model's initialisation
//   GPT model(gpt_options);
//   GPTJob job(model, tokenizer, tokens, job_options);     // or SequenceJob, Seq2SeqJob
//   Trainer trainer(job, {.optimizer = OptimizerKind::adamw, .lr = 1e-3, .steps = 2000}, outputs);
//   TrainSummary summary = trainer.run();                  // to the budget, the target or a stop
//
// One update (train_step), for update number n = step() + 1:
//   default_generator().set_step(n)   dropout masks are a function of (seed, n, call), so a
//                                     replayed update draws the same masks
//   loss = job.loss(n - 1, rows)      batch n - 1 (this process's rows of it), in train mode
//   backward (gradients averaged over processes as they finish), clip_grad_norm (clip_norm > 0),
//   the divergence checks, then the optimizer at lr = schedule.at(n - 1)
// With grad_accum K > 1 this process's rows are split into K equal micro-batches, each a forward
// and a backward of its own (so a step keeps the activations of one micro-batch only), their
// gradients summed in place, each micro-batch's loss weighted by its share of the rows: the
// update is the one of the whole batch, up to rounding. Only the last backward averages over
// processes, so a run over several exchanges gradients once per update.
// Every eval_every updates, at the last one, and before the first update of a fresh run
// (row 0, the untrained baseline), run() evaluates (job.evaluate), appends a metrics row,
// redraws the plot and saves the checkpoint; it stops at the first evaluation whose seq_acc
// reaches target_seq_acc. request_stop() (Ctrl-C, SIGTERM: train/stop_signals.h) ends the run
// after the current update, which is then saved; over several processes every rank stops after
// the same update.
//
// Over several processes, before the first collective (at the first run(), train_step() or
// evaluate(), so after a resume), the ranks compare what must be the same on each of them
// (train/dist/agreement.h): options.identity (the program's configuration), the job's kind and
// metadata, the trajectory options, the evaluation cadence and target, the batch, the resumed
// step and every parameter's name, dtype and shape. A difference is a RanksDisagree on
// every rank naming it; then the batch is split and rank 0's parameters are broadcast.
//
// Checkpoints (train/io/checkpoint.h) hold the parameters, the optimizer state, the default
// generator's state, the data position, and in the metadata "model_kind" (job.kind()), the
// job's entries (its model options, task or data), "trainer" (the options below that shape the
// trajectory) and "loop" (the metrics window, the clock, the starting loss). resume() restores
// all of it, so that on the same thread count the updates after a resume are bit for bit those
// of the uninterrupted run. A resumed run may have a larger `steps` than its checkpoint, and no
// other trajectory option may differ: it extends the run, whose schedule (warm-up, then decay
// to min_lr) then ends at the new last step. With the constant schedule an extended run is bit
// for bit the run that had the larger budget from the start.
//
// Frozen parameters (requires_grad false: a fine-tuning run's base, train/finetune.h) are saved
// and compared like the others but never reach the optimizer, the gradient average or clipping:
// they get no gradient and no optimizer state. With TrainerOutputs::save_trainable_only a
// checkpoint holds only the parameters that train (and the metadata "saved_parameters":
// "trainable"); resuming from it restores those and leaves the frozen ones as the program
// loaded them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "attograd/train/dist/agreement.h"
#include "attograd/train/dist/communicator.h"
#include "attograd/train/dist/data_parallel.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/job.h"
#include "attograd/train/observer.h"
#include "attograd/train/optim.h"
#include "attograd/train/report/run_clock.h"
#include "attograd/train/schedule.h"
#include "attograd/train/update.h"

namespace ag {

enum class OptimizerKind { sgd, adam, adamw };
const char* optimizer_kind_name(OptimizerKind kind);  // "sgd", "adam", "adamw"
// Inverse of optimizer_kind_name; std::invalid_argument listing the choices otherwise.
OptimizerKind parse_optimizer_kind(const std::string& name);

// Which parameters weight decay applies to: all of them, or only the matrices, GPT-2's recipe
// (as minGPT and nanoGPT until 2023 wrote it; nanoGPT now decays the embedding tables too).
// decays() below is the rule.
enum class DecayParams { all, matrices };
const char* decay_params_name(DecayParams which);  // "all", "matrices"
// Inverse of decay_params_name; std::invalid_argument listing the choices otherwise.
DecayParams parse_decay_params(const std::string& name);

struct TrainerOptions {
  // What the trajectory depends on: stored in checkpoints and required to match on resume.
  OptimizerKind optimizer = OptimizerKind::adam;
  double lr = 5e-3;            // peak learning rate (after warm-up)
  double min_lr = 0.0;         // reached at `steps` by cosine and linear decay
  double weight_decay = 0.0;   // L2 for SGD and Adam, decoupled for AdamW
  DecayParams decay = DecayParams::all;  // the parameters weight_decay applies to
  double momentum = 0.9;       // SGD only
  double beta1 = 0.9;          // Adam and AdamW: decay rate of the first moment
  double beta2 = 0.999;        // and of the second
  int64_t warmup_steps = 30;
  LrDecay schedule = LrDecay::cosine;
  int64_t steps = 1000;        // the step budget, and the end of the decay
  double clip_norm = 1.0;      // max global gradient norm; 0 turns clipping off
  int64_t grad_accum = 1;      // micro-batches per update: each process's rows of a batch in K parts
  // What only observes the run.
  int64_t eval_every = 10;
  double target_seq_acc = 0.99;  // stop at the first evaluation whose seq_acc reaches it; > 1 never stops
  int threads = 1;               // ag::set_num_threads at construction
  // Activation recompute (autograd/recompute.h): the job's model keeps only each block's input
  // during a step and runs the block again in backward. The same numbers, less memory, more
  // time; a resumed run may turn it on or off. TrainingJob::set_recompute at construction.
  bool recompute = false;
  // The processes of a data-parallel run (train/dist/data_parallel.h); null, or a world of
  // one, trains in this process alone.
  Communicator* communicator = nullptr;
  // What else must be the same on every rank, e.g. configuration_identity(the program's
  // configuration): compared with the trainer's own items before the first collective.
  RunIdentity identity{};
};

// Upper bounds shared by the command lines and checkpoint metadata.
struct TrainerLimits {
  static constexpr int64_t steps = int64_t{1} << 31;  // also bounds warmup_steps and eval_every
  static constexpr double lr = 1e3;                   // also bounds min_lr and weight_decay
  static constexpr double clip_norm = 1e6;
  static constexpr int64_t eval_sequences = int64_t{1} << 20;
  static constexpr int threads = 256;
  static constexpr int64_t grad_accum = int64_t{1} << 20;
};

// Throws std::invalid_argument naming the first bad option and its value.
void validate(const TrainerOptions& options);
// The optimizer the options name, over `params`, at the options' lr, betas and weight decay,
// weight decay applied only where decays() says so.
std::unique_ptr<Optimizer> make_optimizer(const NamedVariables& params, const TrainerOptions& options);
// Whether weight decay applies to the parameter `name` of shape `shape` under `which`. Under
// `matrices` it applies to parameters of rank >= 2 that are not an embedding table, so it leaves
// alone the biases, the LayerNorms' weights, and the tables of tokens and positions. A table is
// known by its module's name, the part of `name` before ".weight": "pos", "wte", "wpe" or a name
// ending in "embed" ("embed", "src_embed", "tgt_embed"), the names attograd's models and
// nanoGPT give them. The GPT's head is tied to embed.weight, so it is not decayed either.
bool decays(const std::string& name, const Shape& shape, DecayParams which);
// The learning-rate schedule the options describe (warm-up, decay to min_lr at `steps`).
LrScheduleOptions schedule_options(const TrainerOptions& options);

// The trajectory-shaping options (the first group above) as JSON, and back into `base` (whose
// observing options are kept). Parsing checks every field; std::invalid_argument otherwise.
std::string trainer_options_to_json(const TrainerOptions& options);
TrainerOptions trainer_options_from_json(const std::string& json, const TrainerOptions& base = {});

// What a checkpoint holds, by its "model_kind" ("sequence" for the toy tagger's checkpoints
// written before the marker existed), "unknown" otherwise.
std::string checkpoint_model_kind(const CheckpointInfo& info);
// std::runtime_error naming the file, what it holds and the program that wrote it, unless the
// checkpoint's kind is `kind`.
// Returns the checkpoint, for chaining: parse_entry(require_model_kind(ck, "gpt"), "model", ...).
const Checkpoint& require_model_kind(const Checkpoint& checkpoint, const std::string& kind);

// This rank's rows of a batch of `batch_rows` over `processes` (shard_of) must split into
// `grad_accum` equal micro-batches: std::invalid_argument naming --grad-accum, the rows and the
// batch to choose otherwise. The loop checks it; programs call it to refuse before they build.
void check_micro_batches(int64_t batch_rows, int processes, int64_t grad_accum);

// The options of a resumed run, decided in this one place for every program: the trajectory
// from the checkpoint, what only observes the run (evaluation cadence, target, threads,
// processes) from `observing` (the command line). std::runtime_error naming the file when its
// "trainer" entry is missing or invalid, or its loop step disagrees with it.
TrainerOptions resumed_trainer_options(const Checkpoint& checkpoint, const TrainerOptions& observing);
// The update a checkpoint was saved after (its "loop" entry), checked as above.
int64_t checkpoint_step(const Checkpoint& checkpoint);

// Where a run reports. Everything is optional. progress, log_path and plot_path are the
// observers every program uses (train/report/observers.h), built by run(); `observers` are
// called after them, in order.
struct TrainerOutputs {
  std::ostream* progress = nullptr;  // progress line and evaluation lines; null is silent
  bool interactive = false;          // redraw the progress line in place (stdout_is_terminal())
  std::string checkpoint_path{};     // saved at every evaluation and when the run stops
  bool save_trainable_only = false;  // the checkpoint leaves out the frozen parameters
  std::string log_path{};            // metrics, one JSON line per evaluation
  std::string plot_path{};           // SVG of the metrics, rewritten at every evaluation
  std::string plot_title = "training run";
  std::function<void(int64_t step, double loss)> on_step{};  // after every update, e.g. to record losses
  std::vector<TrainingObserver*> observers{};  // not owned; they outlive the run
};

struct TrainSummary {
  int64_t steps = 0;            // updates done, resumed ones included
  int64_t steps_this_run = 0;
  bool reached_target = false;
  bool interrupted = false;     // request_stop() ended the run before its budget
  int stop_signal = 0;          // the signal of that request (over ranks: SIGINT before SIGTERM
                                // before SIGHUP), 0 for a request without one
  Evaluation eval;              // the last evaluation
  double train_loss = Evaluation::kNone;  // mean training loss of the last metrics window
  double elapsed_s = 0;         // wall time, earlier sessions of a resumed run included
  double run_s = 0;             // wall time of this call
  double tokens_per_s = 0;      // training tokens per second of training time in this call
};

class Trainer {
 public:
  // The job (and its model) must outlive the trainer. Validates the options
  // (std::invalid_argument) and sets the thread count; over several processes the ranks join at
  // the first run(), train_step() or evaluate() (see above).
  Trainer(TrainingJob& job, const TrainerOptions& options, TrainerOutputs outputs = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One update on the next training batch. A diverged step (see TrainingDiverged) throws,
  // naming the update, the loss, the gradient norm, the learning rate and the likely causes,
  // before the parameters change.
  StepResult train_step();
  // job.evaluate() in eval mode, without a graph; the model's mode is restored.
  Evaluation evaluate();

  // Trains from step() until the target accuracy, the budget or request_stop().
  TrainSummary run();
  // Ends run() after the current update (it then saves the checkpoint). `signal` is the one that
  // asked (0: none), reported in TrainSummary::stop_signal. Safe from a signal handler.
  void request_stop(int signal = 0) { stop_request_.store(signal > 0 ? signal : kStopWithoutSignal); }

  void save_checkpoint(const std::string& path) const;
  // Continues the run saved in the checkpoint: its model kind, the job's entries and the
  // trajectory options must be this run's (std::runtime_error naming the file and both values
  // otherwise). Restores parameters, optimizer state, the default generator, the data position,
  // the metrics window and the clock. Nothing changes unless everything checks.
  void resume(const Checkpoint& checkpoint);
  void resume(const std::string& path) { resume(Checkpoint::open(path)); }

  int64_t step() const { return step_; }
  const TrainerOptions& options() const { return options_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  TrainingJob& job() { return job_; }
  // The gradient average of a run over several processes; null in one process.
  const DataParallel* data_parallel() const { return data_parallel_.get(); }

 private:
  static constexpr int kStopWithoutSignal = -1;

  std::map<std::string, std::string> metadata() const;
  void save_and_mark();
  // Over several processes, once: the ranks' agreement, the batch split, rank 0's parameters.
  void join_ranks();
  RunIdentity identity() const;
  // The stop request of any rank, the same on every rank: 0 none, else kStopWithoutSignal or a signal.
  int agreed_stop();

  TrainingJob& job_;
  TrainerOptions options_;
  TrainerOutputs outputs_;
  NamedVariables params_;     // every parameter, frozen or not: what a checkpoint holds
  NamedVariables trainable_;  // those that require grad: what the optimizer updates
  LrSchedule schedule_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<DataParallel> data_parallel_;  // over several processes only
  Shard shard_;                                  // this rank's rows of every training batch
  int64_t step_ = 0;
  int64_t last_tokens_ = 0;  // the tokens of the last update's batch
  bool resumed_ = false;
  bool joined_ = false;
  // The current metrics window (since the last evaluation).
  double window_loss_sum_ = 0;
  int64_t window_steps_ = 0;
  DivergenceGuard guard_;  // the starting loss, the last saved step, what a divergence message says
  RunClock clock_;         // the run's wall time, earlier sessions included
  std::atomic<int> stop_request_{0};  // 0, kStopWithoutSignal or the signal
};

}  // namespace ag
