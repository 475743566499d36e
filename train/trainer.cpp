#include "attograd/core/format.h"
#include "attograd/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/core/rng.h"
#include "attograd/core/threads.h"
#include "attograd/train/checkpoint.h"
#include "attograd/train/losses.h"
#include "attograd/train/memory.h"
#include "attograd/train/plot.h"
#include "attograd/train/progress.h"

namespace ag {

// request_stop() runs in signal handlers, where only lock-free atomics are safe.
static_assert(std::atomic<bool>::is_always_lock_free);

namespace {

using Clock = std::chrono::steady_clock;

// Held-out sequences are generated in batches of at most this many rows: the held-out set then
// does not depend on the training batch size.
constexpr int64_t kEvalBatch = 256;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}


TaskOptions with_batch(TaskOptions task, int64_t batch) {
  task.batch_size = batch;
  return task;
}

// Validates every option first, so that a bad one is reported by its own name.
LrScheduleOptions checked_schedule_options(const TrainerOptions& o) {
  validate(o);
  return schedule_options(o);
}

// Rows [begin, begin + rows) of a (B, T) batch.
Indices row_range(const Indices& x, int64_t begin, int64_t rows) {
  const int64_t t = x.shape[1];
  return Indices(Shape{rows, t}, std::vector<int64_t>(x.data.begin() + begin * t, x.data.begin() + (begin + rows) * t));
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const NamedVariables& params, const TrainerOptions& o) {
  switch (o.optimizer) {
    case OptimizerKind::sgd:
      return std::make_unique<SGD>(params, SGDOptions{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
    case OptimizerKind::adam:
      return std::make_unique<Adam>(params, AdamOptions{.lr = o.lr, .weight_decay = o.weight_decay});
    case OptimizerKind::adamw:
      return std::make_unique<AdamW>(params, AdamWOptions{.lr = o.lr, .weight_decay = o.weight_decay});
  }
  throw std::logic_error("Trainer: unknown optimizer kind");
}

Trainer::Trainer(SequenceModel& model, const TaskOptions& task, const TrainerOptions& options, TrainerOutputs outputs)
    : model_(model),
      task_(task),
      eval_task_(with_batch(task, std::min(options.eval_sequences > 0 ? options.eval_sequences : 1, kEvalBatch))),
      options_(options),
      outputs_(std::move(outputs)),
      params_(model.named_parameters()),
      schedule_(checked_schedule_options(options)) {
  const SequenceModelOptions& m = model.options();
  if (m.vocab != task.vocab_size || m.max_len < task.seq_len) {
    throw std::invalid_argument("Trainer: the model (vocab " + std::to_string(m.vocab) + ", max_len " +
                                std::to_string(m.max_len) + ") does not fit the task (vocab " +
                                std::to_string(task.vocab_size) + ", seq_len " + std::to_string(task.seq_len) + ")");
  }
  if (!outputs_.plot_path.empty() && outputs_.log_path.empty()) {
    throw std::logic_error("Trainer: plot_path '" + outputs_.plot_path + "' needs a log_path (the plot draws the log's rows)");
  }
  optimizer_ = make_optimizer(params_, options_);
  eval_rows_ = eval_rows_for(m, task, eval_task_.options().batch_size);
  guard_ = {.trainer = "Trainer", .peak_lr = options_.lr, .clip_norm = options_.clip_norm,
            .warmup_steps = options_.warmup_steps, .vocab = task.vocab_size, .checkpoint_path = outputs_.checkpoint_path};
  set_num_threads(options_.threads);
  shard_ = {.begin = 0, .rows = task.batch_size};
  if (Communicator* comm = options_.communicator; comm != nullptr && comm->size() > 1) {
    // Checked before the first collective, by every rank alike.
    shard_ = shard_of(task.batch_size, comm->rank(), comm->size(), "--batch");
    data_parallel_ = std::make_unique<DataParallel>(params_, *comm);
    data_parallel_->broadcast_parameters();
  }
}

Trainer::~Trainer() = default;

StepResult Trainer::train_step() {
  const int64_t update = step_ + 1;
  default_generator().set_step(data_parallel_ ? data_parallel_->dropout_step(update) : static_cast<uint64_t>(update));
  const Batch batch = task_.train_batch(static_cast<uint64_t>(step_));
  model_.train();
  optimizer_->zero_grad();
  // logits: (B, T, V), targets: (B, T); over several processes, this rank's rows of the batch
  const Variable loss = data_parallel_ ? cross_entropy(model_(shard_rows(batch.inputs, shard_)), shard_rows(batch.targets, shard_))
                                       : cross_entropy(model_(batch.inputs), batch.targets);
  const StepResult r =
      checked_update(loss, params_, *optimizer_, schedule_.at(step_), guard_, update, data_parallel_.get());
  step_ = update;
  return r;
}

SequenceMetrics Trainer::evaluate() {
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model_);
  SequenceMetrics total;
  int64_t remaining = options_.eval_sequences;
  for (uint64_t i = 0; remaining > 0; ++i) {
    const Batch batch = eval_task_.eval_batch(i);
    const int64_t rows = std::min(remaining, batch.inputs.shape[0]);
    // Over several processes each rank takes its contiguous part of every held-out batch.
    const int64_t rank = data_parallel_ ? data_parallel_->rank() : 0, ranks = data_parallel_ ? data_parallel_->size() : 1;
    const int64_t first = rows * rank / ranks, last = rows * (rank + 1) / ranks;
    // The held-out set is generated in fixed batches; the model sees them in chunks of
    // eval_rows_, sized so that long sequences do not multiply evaluation memory.
    for (int64_t begin = first; begin < last; begin += eval_rows_) {
      const int64_t n = std::min(eval_rows_, last - begin);
      const bool whole = begin == 0 && n == batch.inputs.shape[0];
      const Indices inputs = whole ? batch.inputs : row_range(batch.inputs, begin, n);
      const Indices targets = whole ? batch.targets : row_range(batch.targets, begin, n);
      total += sequence_metrics(model_(inputs).value(), targets);
    }
    remaining -= rows;
  }
  if (data_parallel_) {
    std::vector<double> v{total.loss_sum, static_cast<double>(total.tokens), static_cast<double>(total.correct_tokens),
                          static_cast<double>(total.sequences), static_cast<double>(total.correct_sequences)};
    data_parallel_->sum(v);  // counts below 2^53 add exactly in double
    total = {.loss_sum = v[0], .tokens = static_cast<int64_t>(v[1]), .correct_tokens = static_cast<int64_t>(v[2]),
             .sequences = static_cast<int64_t>(v[3]), .correct_sequences = static_cast<int64_t>(v[4])};
  }
  return total;
}

Indices Trainer::predict(const Indices& inputs) {
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model_);
  return predict_tokens(model_(inputs).value());
}

TrainSummary Trainer::run() {
  TrainSummary summary;
  stop_requested_.store(false);
  const RunClock::Session session = clock_.start();

  std::optional<MetricsLog> log = open_metrics_log(outputs_.log_path, resumed_, step_);
  std::optional<ProgressDisplay> display;
  if (outputs_.progress != nullptr) display.emplace(*outputs_.progress, outputs_.interactive, options_.eval_every);
  ProgressInfo info;
  info.total_steps = options_.steps;
  bool have_eval = false;

  // Evaluates, closes the metrics window into a row, and writes the log, the plot and (after
  // an update) the checkpoint. `last` is the update just made, null before the first one.
  const auto record = [&](const StepResult* last, double tokens_per_s) {
    summary.eval = evaluate();
    have_eval = true;
    // Parameters that make the held-out loss explode are not saved over the last good ones.
    const double eval_loss = summary.eval.loss();
    if (last != nullptr && !(eval_loss <= guard_.limit())) {
      guard_.diverged(step_, "the held-out loss after it is " + format_number(eval_loss) + " (the limit is " +
                          format_number(guard_.limit()) + ")",
               last->grad_norm, last->lr);
    }
    MetricsRow row;
    row.step = step_;
    if (window_steps_ > 0) row.train_loss = window_loss_sum_ / static_cast<double>(window_steps_);
    row.eval_loss = summary.eval.loss();
    row.token_acc = summary.eval.token_accuracy();
    row.seq_acc = summary.eval.sequence_accuracy();
    if (last != nullptr) {
      row.lr = last->lr;
      row.grad_norm = last->grad_norm;
      row.tokens_per_s = tokens_per_s;
    }
    row.elapsed_s = clock_.total_s();
    window_loss_sum_ = 0;
    window_steps_ = 0;
    if (log) {
      log->append(row);
      if (!outputs_.plot_path.empty()) write_metrics_plot(outputs_.plot_path, log->rows(), {.title = outputs_.plot_title});
    }
    if (last != nullptr && !outputs_.checkpoint_path.empty()) {
      save_checkpoint(outputs_.checkpoint_path);
      guard_.last_saved_step = step_;
    }
    info.token_acc = row.token_acc;
    info.seq_acc = row.seq_acc;
    if (display && outputs_.interactive) {
      std::ostringstream line;
      line.setf(std::ios::fixed);
      line.precision(4);
      line << "step " << step_ << ": held-out loss " << row.eval_loss;
      line.precision(1);
      line << ", token acc " << 100 * row.token_acc << "%, sequence acc " << 100 * row.seq_acc << "%";
      display->message(line.str());
    }
    return row;
  };

  // A fresh run starts its log with the untrained model: the baseline every curve starts from.
  if (step_ == 0 && !resumed_ && step_ < options_.steps) record(nullptr, 0.0);

  const TaskOptions& t = task_.options();
  const int64_t tokens_per_step = t.batch_size * t.seq_len;
  double train_s = 0;
  while (step_ < options_.steps) {
    const Clock::time_point t0 = Clock::now();
    const StepResult r = train_step();
    train_s += seconds_since(t0);
    ++summary.steps_this_run;
    window_loss_sum_ += r.loss;
    ++window_steps_;
    if (outputs_.on_step) outputs_.on_step(step_, r.loss);

    // A stop request (Ctrl-C) may reach the ranks at different updates: they stop together.
    const bool stop = data_parallel_ ? data_parallel_->any(stop_requested_.load()) : stop_requested_.load();
    const double tokens_per_s = train_s > 0 ? static_cast<double>(summary.steps_this_run * tokens_per_step) / train_s : 0;
    summary.tokens_per_s = tokens_per_s;
    info.loss = window_loss_sum_ / static_cast<double>(window_steps_);
    if (step_ % options_.eval_every == 0 || step_ == options_.steps) {
      summary.reached_target = record(&r, tokens_per_s).seq_acc >= options_.target_seq_acc;
    } else if (stop && !outputs_.checkpoint_path.empty()) {
      save_checkpoint(outputs_.checkpoint_path);
      guard_.last_saved_step = step_;
    }
    if (display) {
      info.step = step_;
      info.tokens_per_s = tokens_per_s;
      info.elapsed_s = clock_.total_s();
      display->update(info);
    }
    if (summary.reached_target || stop) {
      summary.interrupted = stop && !summary.reached_target;
      break;
    }
  }
  if (!have_eval) summary.eval = evaluate();  // nothing left to train: report where the run stands
  if (display) display->finish();
  summary.steps = step_;
  summary.run_s = clock_.session_s();
  summary.elapsed_s = clock_.total_s();
  return summary;
}

}  // namespace ag
