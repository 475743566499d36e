#include "attograd/train/trainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <iomanip>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/ops.h"
#include "attograd/core/format.h"
#include "attograd/core/rng.h"
#include "attograd/core/threads.h"
#include "attograd/train/report/metrics_log.h"
#include "attograd/train/report/observers.h"
#include "attograd/train/report/progress.h"

namespace ag {

// request_stop() runs in signal handlers, where only lock-free atomics are safe.
static_assert(std::atomic<int>::is_always_lock_free);

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Validates every option first, so that a bad one is reported by its own name.
LrScheduleOptions checked_schedule_options(const TrainerOptions& o) {
  validate(o);
  return schedule_options(o);
}

}  // namespace

Evaluation accuracy_evaluation(double loss, double token_acc, double seq_acc, const std::string& token_note,
                               const std::string& seq_name, const std::string& tail) {
  std::ostringstream line;
  line << std::fixed << std::setprecision(4) << "held-out loss " << loss << std::setprecision(1) << ", token acc "
       << 100 * token_acc << "%" << token_note << ", " << seq_name << " " << 100 * seq_acc << "%" << tail;
  return {.loss = loss, .token_acc = token_acc, .seq_acc = seq_acc, .summary = line.str(), .details = {}};
}

Shard Ranks::part(int64_t rows) const {
  const int64_t r = rank(), n = size();
  return {.begin = rows * r / n, .rows = rows * (r + 1) / n - rows * r / n};
}

void Ranks::sum(std::vector<double>& values) const {
  if (data_parallel_ != nullptr) {
    data_parallel_->sum(values);
  } else if (communicator_ != nullptr && communicator_->size() > 1 && !values.empty()) {
    Tensor t = from_vector(values, Shape{static_cast<int64_t>(values.size())}, DType::f64);
    communicator_->all_reduce_sum(t);
    values = t.to_vector();
  }
}

std::unique_ptr<Optimizer> make_optimizer(const NamedVariables& params, const TrainerOptions& o) {
  std::vector<std::string> no_decay;
  for (const auto& [name, p] : params) {
    if (!decays(name, p.shape(), o.decay)) no_decay.push_back(name);
  }
  switch (o.optimizer) {
    case OptimizerKind::sgd:
      return std::make_unique<SGD>(params, SGDOptions{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay,
                                                      .no_decay = no_decay});
    case OptimizerKind::adam:
      return std::make_unique<Adam>(params, AdamOptions{.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2,
                                                        .weight_decay = o.weight_decay, .no_decay = no_decay});
    case OptimizerKind::adamw:
      return std::make_unique<AdamW>(params, AdamWOptions{.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2,
                                                          .weight_decay = o.weight_decay, .no_decay = no_decay});
  }
  throw std::logic_error("Trainer: unknown optimizer kind");
}



Trainer::Trainer(TrainingJob& job, const TrainerOptions& options, TrainerOutputs outputs)
    : job_(job),
      options_(options),
      outputs_(std::move(outputs)),
      params_(job.model().named_parameters()),
      trainable_(job.model().trainable_parameters()),
      schedule_(checked_schedule_options(options)) {
  if (trainable_.empty()) {
    throw std::invalid_argument("Trainer (" + job.kind() + "): every one of the model's " +
                                std::to_string(params_.size()) + " parameters is frozen; nothing would train");
  }
  if (!outputs_.plot_path.empty() && outputs_.log_path.empty()) {
    throw std::logic_error("Trainer: plot_path '" + outputs_.plot_path + "' needs a log_path (the plot draws the log's rows)");
  }
  optimizer_ = make_optimizer(trainable_, options_);
  guard_ = {.trainer = "Trainer (" + job_.kind() + ")", .peak_lr = options_.lr, .clip_norm = options_.clip_norm,
            .warmup_steps = options_.warmup_steps, .vocab = job_.vocab(), .checkpoint_path = outputs_.checkpoint_path};
  set_num_threads(options_.threads);
  job_.set_recompute(options_.recompute);
  shard_ = {.begin = 0, .rows = job_.batch_rows()};
  check_micro_batches(job_.batch_rows(), 1, options_.grad_accum);
}

void check_micro_batches(int64_t batch_rows, int processes, int64_t grad_accum) {
  const int64_t rows = batch_rows / processes;
  if (rows % grad_accum == 0) return;
  throw std::invalid_argument(
      "Trainer: --grad-accum " + std::to_string(grad_accum) + " must divide the rows each process trains on per " +
      "update, " + std::to_string(rows) + " (a batch of " + std::to_string(batch_rows) + " rows" +
      (processes > 1 ? " over " + std::to_string(processes) + " processes" : std::string()) +
      "): choose a --batch that is a multiple of " + std::to_string(grad_accum * processes));
}

Trainer::~Trainer() = default;

RunIdentity Trainer::identity() const {
  RunIdentity id = options_.identity;
  id.emplace_back("the model kind", job_.kind());
  for (const auto& [key, value] : job_.metadata()) id.emplace_back("the job's '" + key + "' entry", value);
  id.emplace_back("the trainer options", trainer_options_to_json(options_));
  id.emplace_back("the evaluation cadence (eval_every)", std::to_string(options_.eval_every));
  id.emplace_back("the target accuracy", format_number(options_.target_seq_acc));
  id.emplace_back("the batch rows", std::to_string(job_.batch_rows()));
  id.emplace_back("the step the run starts from", std::to_string(step_));
  for (const auto& [name, p] : params_) {
    id.emplace_back("tensor " + name,
                    std::string(dtype_name(p.dtype())) + " " + p.shape().str() + (p.requires_grad() ? "" : " frozen"));
  }
  return id;
}

void Trainer::join_ranks() {
  if (joined_) return;
  joined_ = true;
  Communicator* comm = options_.communicator;
  if (comm == nullptr || comm->size() == 1) return;
  require_same_identity(*comm, identity());  // the first collective: nothing else has run yet
  shard_ = shard_of(job_.batch_rows(), comm->rank(), comm->size(),
                    resumed_ ? "the checkpoint's batch (a resumed run keeps it)" : "--batch", !resumed_);
  check_micro_batches(job_.batch_rows(), comm->size(), options_.grad_accum);
  data_parallel_ = std::make_unique<DataParallel>(trainable_, *comm);
  data_parallel_->broadcast_parameters();
}

int Trainer::agreed_stop() {
  const int local = stop_request_.load();
  if (!data_parallel_) return local;
  // Which requests any rank has seen; every rank then picks the same one.
  std::vector<double> seen{local == SIGINT ? 1.0 : 0.0, local == SIGTERM ? 1.0 : 0.0, local == SIGHUP ? 1.0 : 0.0,
                           local != 0 ? 1.0 : 0.0};
  data_parallel_->sum(seen);
  if (seen[0] > 0) return SIGINT;
  if (seen[1] > 0) return SIGTERM;
  if (seen[2] > 0) return SIGHUP;
  return seen[3] > 0 ? kStopWithoutSignal : 0;
}

StepResult Trainer::train_step() {
  join_ranks();
  const int64_t update = step_ + 1;
  default_generator().set_step(data_parallel_ ? data_parallel_->dropout_step(update) : static_cast<uint64_t>(update));
  job_.model().train();
  optimizer_->zero_grad();
  // Micro-batches 0 .. K-2: forward and backward, their gradients summed in place, nothing
  // exchanged; each loss is weighted by its share of this process's rows (a job scales a shard's
  // loss as one of equal shards; see TrainingJob::loss).
  const int64_t k = options_.grad_accum;
  const int64_t rows = shard_.rows / k;
  const double share = 1.0 / static_cast<double>(k);
  double earlier = 0;
  for (int64_t i = 0; i + 1 < k; ++i) {
    const Variable micro = job_.loss(static_cast<uint64_t>(step_), {.begin = shard_.begin + i * rows, .rows = rows}).loss * share;
    earlier += micro.item();
    micro.backward();
  }
  // The last one goes through the checked update, whose backward averages over processes.
  const StepLoss s = job_.loss(static_cast<uint64_t>(step_), {.begin = shard_.begin + (k - 1) * rows, .rows = rows});
  last_tokens_ = s.tokens;
  const StepResult r = checked_update(k == 1 ? s.loss : s.loss * share, trainable_, *optimizer_, schedule_.at(step_),
                                      guard_, update, data_parallel_.get(), earlier);
  step_ = update;
  return r;
}

Evaluation Trainer::evaluate() {
  join_ranks();
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(job_.model());
  return job_.evaluate(Ranks(data_parallel_.get()));
}

void Trainer::save_and_mark() {
  save_checkpoint(outputs_.checkpoint_path);
  guard_.last_saved_step = step_;
}

TrainSummary Trainer::run() {
  TrainSummary summary;
  stop_request_.store(0);
  join_ranks();
  const RunClock::Session session = clock_.start();

  // The reports: the progress line, the metrics log and the plot, then the caller's observers.
  std::optional<ProgressObserver> progress;
  std::optional<MetricsLogObserver> log;
  std::optional<PlotObserver> plot;
  std::vector<TrainingObserver*> observers;
  if (outputs_.progress != nullptr) {
    observers.push_back(&progress.emplace(*outputs_.progress, outputs_.interactive, options_.eval_every));
  }
  if (!outputs_.log_path.empty()) {
    observers.push_back(&log.emplace(outputs_.log_path));
    if (!outputs_.plot_path.empty()) observers.push_back(&plot.emplace(outputs_.plot_path, outputs_.plot_title, *log));
  }
  observers.insert(observers.end(), outputs_.observers.begin(), outputs_.observers.end());
  for (TrainingObserver* o : observers) o->on_run_start(step_, resumed_);
  bool have_eval = false;

  // Evaluates, closes the metrics window into a row, reports it and (after an update) saves the
  // checkpoint. `last` is the update just made, null before the first one.
  const auto record = [&](const StepResult* last, double tokens_per_s) {
    summary.eval = evaluate();
    have_eval = true;
    // Parameters that make the held-out loss explode are not saved over the last good ones.
    if (last != nullptr && !(summary.eval.loss <= guard_.limit())) {
      guard_.diverged(step_, "the held-out loss after it is " + format_number(summary.eval.loss) + " (the limit is " +
                          format_number(guard_.limit()) + ")",
               last->grad_norm, last->lr);
    }
    MetricsRow row;
    row.step = step_;
    if (window_steps_ > 0) row.train_loss = window_loss_sum_ / static_cast<double>(window_steps_);
    row.eval_loss = summary.eval.loss;
    row.eval_bits_per_byte = summary.eval.bits_per_byte;
    row.token_acc = summary.eval.token_acc;
    row.seq_acc = summary.eval.seq_acc;
    row.sliding_nats_per_token = summary.eval.sliding_loss;
    row.sliding_perplexity = std::exp(summary.eval.sliding_loss);
    row.sliding_bits_per_byte = summary.eval.sliding_bits_per_byte;
    if (last != nullptr) {
      row.lr = last->lr;
      row.grad_norm = last->grad_norm;
      row.tokens_per_s = tokens_per_s;
    }
    row.elapsed_s = clock_.total_s();
    summary.train_loss = row.train_loss;
    window_loss_sum_ = 0;
    window_steps_ = 0;
    for (TrainingObserver* o : observers) o->on_evaluation(row, summary.eval);
    if (last != nullptr && !outputs_.checkpoint_path.empty()) save_and_mark();
    return row;
  };

  // A fresh run starts its log with the untrained model: the baseline every curve starts from.
  if (step_ == 0 && !resumed_ && step_ < options_.steps) record(nullptr, 0.0);

  double train_s = 0;
  int64_t tokens = 0;
  while (step_ < options_.steps) {
    const Clock::time_point t0 = Clock::now();
    const StepResult r = train_step();
    train_s += seconds_since(t0);
    tokens += last_tokens_;
    ++summary.steps_this_run;
    window_loss_sum_ += r.loss;
    ++window_steps_;
    if (outputs_.on_step) outputs_.on_step(step_, r.loss);

    // A stop request (Ctrl-C) may reach the ranks at different updates: they stop together.
    const int stop_request = agreed_stop();
    const bool stop = stop_request != 0;
    const double tokens_per_s = train_s > 0 ? static_cast<double>(tokens) / train_s : 0;
    summary.tokens_per_s = tokens_per_s;
    const double window_loss = window_loss_sum_ / static_cast<double>(window_steps_);
    if (step_ % options_.eval_every == 0 || step_ == options_.steps) {
      summary.reached_target = record(&r, tokens_per_s).seq_acc >= options_.target_seq_acc;
    } else if (stop && !outputs_.checkpoint_path.empty()) {
      save_and_mark();
    }
    const StepReport report{.step = step_, .total_steps = options_.steps, .loss = window_loss,
                            .tokens_per_s = tokens_per_s, .elapsed_s = clock_.total_s()};
    for (TrainingObserver* o : observers) o->on_step(report);
    if (summary.reached_target || stop) {
      // A stop at the very last update, or one that meets the target, changes nothing.
      summary.interrupted = stop && !summary.reached_target && step_ < options_.steps;
      if (summary.interrupted && stop_request > 0) summary.stop_signal = stop_request;
      break;
    }
  }
  if (!have_eval) summary.eval = evaluate();  // nothing left to train: report where the run stands
  summary.steps = step_;
  summary.run_s = clock_.session_s();
  summary.elapsed_s = clock_.total_s();
  for (TrainingObserver* o : observers) o->on_run_end(summary);
  return summary;
}



}  // namespace ag
