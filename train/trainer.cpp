#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "autograd/grad_mode.h"
#include "core/rng.h"
#include "core/threads.h"
#include "train/checkpoint.h"
#include "train/json_text.h"
#include "train/losses.h"
#include "train/memory.h"
#include "train/plot.h"
#include "train/progress.h"

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

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

TaskOptions with_batch(TaskOptions task, int64_t batch) {
  task.batch_size = batch;
  return task;
}

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

LrScheduleOptions schedule_options(const TrainerOptions& o) {
  return {.lr = o.lr, .min_lr = o.min_lr, .warmup_steps = o.warmup_steps, .total_steps = o.steps, .decay = o.schedule};
}

// Validates every option first, so that a bad one is reported by its own name.
LrScheduleOptions checked_schedule_options(const TrainerOptions& o) {
  validate(o);
  return schedule_options(o);
}

// Puts the model in eval mode for one scope and back into the mode it had.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& m) : module_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

// Rows [begin, begin + rows) of a (B, T) batch.
Indices row_range(const Indices& x, int64_t begin, int64_t rows) {
  const int64_t t = x.shape[1];
  return Indices(Shape{rows, t}, std::vector<int64_t>(x.data.begin() + begin * t, x.data.begin() + (begin + rows) * t));
}

const std::string& metadata_entry(const std::string& path, const CheckpointInfo& info, const char* key) {
  const auto it = info.metadata.find(key);
  if (it == info.metadata.end()) {
    throw std::runtime_error("checkpoint '" + path + "': __metadata__ has no '" + key +
                             "' (it was not written by the Trainer)");
  }
  return it->second;
}

// Parses one JSON metadata entry with `parse`, turning its std::invalid_argument into the
// checkpoint's std::runtime_error.
template <typename Parse>
auto parse_entry(const std::string& path, const CheckpointInfo& info, const char* key, Parse parse) {
  const std::string& text = metadata_entry(path, info, key);
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("checkpoint '" + path + "': metadata '" + key + "' is invalid: " + e.what());
  } catch (const JsonError& e) {
    throw std::runtime_error("checkpoint '" + path + "': metadata '" + key + "' is invalid: " + e.what());
  }
}

// The metrics window and clock of the run, saved as the "loop" entry.
struct LoopState {
  int64_t step = 0;
  double window_loss_sum = 0;
  int64_t window_steps = 0;
  double elapsed_s = 0;
  double first_loss = 0;  // the run's first training loss, the reference for divergence; 0 = none yet
};

std::string loop_state_to_json(const LoopState& s) {
  return OrderedJson({{"step", s.step},
                      {"window_loss_sum", s.window_loss_sum},
                      {"window_steps", s.window_steps},
                      {"elapsed_s", s.elapsed_s},
                      {"first_loss", s.first_loss}})
      .dump();
}

LoopState loop_state_from_json(const std::string& text) {
  // first_loss is absent from checkpoints written before it was saved.
  const Json j = parse_options_object(text, {"step", "window_loss_sum", "window_steps", "elapsed_s", "first_loss"}, "");
  const auto field = [&](const char* key) -> const Json& {
    const auto it = j.find(key);
    if (it == j.end()) throw std::invalid_argument(std::string("missing \"") + key + "\" in " + text);
    return *it;
  };
  const auto integer = [&](const char* key) {
    const std::optional<int64_t> v = json_int64(field(key));
    if (!v) throw std::invalid_argument(std::string("\"") + key + "\" must be an integer, got " + field(key).dump());
    return *v;
  };
  const auto real = [&](const char* key) {
    if (!field(key).is_number()) {
      throw std::invalid_argument(std::string("\"") + key + "\" must be a number, got " + field(key).dump());
    }
    return field(key).get<double>();
  };
  LoopState s;
  s.step = integer("step");
  s.window_loss_sum = real("window_loss_sum");
  s.window_steps = integer("window_steps");
  s.elapsed_s = real("elapsed_s");
  if (j.contains("first_loss")) s.first_loss = real("first_loss");
  if (!(s.first_loss >= 0 && std::isfinite(s.first_loss))) {
    throw std::invalid_argument("first_loss " + number(s.first_loss) + " is not a finite loss");
  }
  if (s.step < 0 || s.step > TrainerLimits::steps || s.window_steps < 0 || s.window_steps > s.step) {
    throw std::invalid_argument("step " + std::to_string(s.step) + " and window_steps " +
                                std::to_string(s.window_steps) + " are inconsistent (need 0 <= window_steps <= step <= " +
                                std::to_string(TrainerLimits::steps) + ")");
  }
  if (!(s.elapsed_s >= 0 && s.elapsed_s < 1e10)) {
    throw std::invalid_argument("elapsed_s " + number(s.elapsed_s) + " is not a duration in seconds");
  }
  if (!(s.window_loss_sum >= 0 && std::isfinite(s.window_loss_sum))) {
    throw std::invalid_argument("window_loss_sum " + number(s.window_loss_sum) + " is not a finite sum of losses");
  }
  return s;
}

// The loop's step against the run's own budget and the data position: a checkpoint cannot be
// further along than its budget allows.
void check_loop_step(const std::string& path, const LoopState& loop, const TrainerOptions& trainer,
                     const CheckpointInfo& info) {
  if (static_cast<uint64_t>(loop.step) != info.data_position) {
    throw std::runtime_error("checkpoint '" + path + "': loop step " + std::to_string(loop.step) +
                             " differs from data_position " + std::to_string(info.data_position));
  }
  if (loop.step > trainer.steps) {
    throw std::runtime_error("checkpoint '" + path + "': loop step " + std::to_string(loop.step) +
                             " is past the run's step budget of " + std::to_string(trainer.steps));
  }
}

}  // namespace

double Trainer::divergence_limit() const {
  const double uniform = std::log(static_cast<double>(task_.options().vocab_size));
  return kDivergenceFactor * std::max(first_loss_, uniform);
}

void Trainer::diverged(int64_t update, const std::string& what, double grad_norm, double lr) const {
  std::ostringstream os;
  os << "training diverged at update " << update << ": " << what << ", gradient norm " << grad_norm;
  os << ", learning rate " << lr << ". Likely causes: a learning rate too high for this model (lr " << options_.lr
     << "), too short a warm-up (warmup_steps " << options_.warmup_steps << "), "
     << (options_.clip_norm > 0 ? "a clipping norm too large (clip_norm " + number(options_.clip_norm) + ")"
                                : std::string("no gradient clipping (clip_norm 0)"))
     << ". This update was not applied; ";
  if (outputs_.checkpoint_path.empty()) {
    os << "no checkpoint is written by this run";
  } else if (last_saved_step_ >= 0) {
    os << "the checkpoint '" << outputs_.checkpoint_path << "' keeps step " << last_saved_step_ << ", the last good state";
  } else {
    os << "no checkpoint was saved before it";
  }
  throw TrainingDiverged("Trainer: " + os.str());
}

const char* optimizer_kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adam: return "adam";
    case OptimizerKind::adamw: return "adamw";
  }
  return "?";
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  for (OptimizerKind k : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw}) {
    if (name == optimizer_kind_name(k)) return k;
  }
  throw std::invalid_argument("unknown optimizer '" + name + "' (choose sgd, adam or adamw)");
}

void validate(const TrainerOptions& o) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("Trainer: " + what); };
  using L = TrainerLimits;
  if (!(o.lr > 0 && o.lr <= L::lr)) fail("lr must lie in (0, " + number(L::lr) + "], got " + number(o.lr));
  if (!(o.min_lr >= 0 && o.min_lr <= o.lr)) fail("min_lr must lie in [0, lr=" + number(o.lr) + "], got " + number(o.min_lr));
  if (!(o.weight_decay >= 0 && o.weight_decay <= L::lr)) {
    fail("weight_decay must lie in [0, " + number(L::lr) + "], got " + number(o.weight_decay));
  }
  if (!(o.momentum >= 0 && o.momentum < 1)) fail("momentum must lie in [0, 1), got " + number(o.momentum));
  if (o.steps < 1 || o.steps > L::steps) {
    fail("steps must lie in [1, " + std::to_string(L::steps) + "], got " + std::to_string(o.steps));
  }
  if (o.warmup_steps < 0 || o.warmup_steps > L::steps) {
    fail("warmup_steps must lie in [0, " + std::to_string(L::steps) + "], got " + std::to_string(o.warmup_steps));
  }
  if (o.schedule != LrDecay::constant && o.warmup_steps >= o.steps) {
    fail("warmup_steps " + std::to_string(o.warmup_steps) + " must be below steps " + std::to_string(o.steps) +
         " for a " + lr_decay_name(o.schedule) + " decay");
  }
  if (!(o.clip_norm >= 0 && o.clip_norm <= L::clip_norm)) {
    fail("clip_norm must lie in [0, " + number(L::clip_norm) + "] (0 turns clipping off), got " + number(o.clip_norm));
  }
  if (o.eval_every < 1 || o.eval_every > L::steps) {
    fail("eval_every must lie in [1, " + std::to_string(L::steps) + "], got " + std::to_string(o.eval_every));
  }
  if (o.eval_sequences < 1 || o.eval_sequences > L::eval_sequences) {
    fail("eval_sequences must lie in [1, " + std::to_string(L::eval_sequences) + "], got " + std::to_string(o.eval_sequences));
  }
  if (!(o.target_seq_acc > 0)) fail("target_seq_acc must be > 0 (above 1 never stops early), got " + number(o.target_seq_acc));
  if (o.threads < 1 || o.threads > L::threads) {
    fail("threads must lie in [1, " + std::to_string(L::threads) + "], got " + std::to_string(o.threads));
  }
  LrSchedule check(schedule_options(o));  // the schedule's own checks
}

std::string trainer_options_to_json(const TrainerOptions& o) {
  return OrderedJson({{"optimizer", optimizer_kind_name(o.optimizer)},
                      {"lr", o.lr},
                      {"min_lr", o.min_lr},
                      {"weight_decay", o.weight_decay},
                      {"momentum", o.momentum},
                      {"warmup_steps", o.warmup_steps},
                      {"schedule", lr_decay_name(o.schedule)},
                      {"steps", o.steps},
                      {"clip_norm", o.clip_norm}})
      .dump();
}

TrainerOptions trainer_options_from_json(const std::string& text, const TrainerOptions& base) {
  const std::string op = "trainer_options_from_json: ";
  const Json j = parse_options_object(text,
                                      {"optimizer", "lr", "min_lr", "weight_decay", "momentum", "warmup_steps",
                                       "schedule", "steps", "clip_norm"},
                                      op);
  const auto field = [&](const char* key) -> const Json& {
    const auto it = j.find(key);
    if (it == j.end()) throw std::invalid_argument(op + "missing \"" + key + "\" in " + text);
    return *it;
  };
  const auto wrong = [&](const char* key, const char* type) {
    return std::invalid_argument(op + "\"" + key + "\" must be " + type + ", got " + field(key).dump());
  };
  const auto real = [&](const char* key) {
    if (!field(key).is_number()) throw wrong(key, "a number");
    return field(key).get<double>();
  };
  const auto integer = [&](const char* key) {
    const std::optional<int64_t> v = json_int64(field(key));
    if (!v) throw wrong(key, "an integer");
    return *v;
  };
  const auto text_of = [&](const char* key) {
    if (!field(key).is_string()) throw wrong(key, "a string");
    return field(key).get<std::string>();
  };
  TrainerOptions o = base;
  o.optimizer = parse_optimizer_kind(text_of("optimizer"));
  o.lr = real("lr");
  o.min_lr = real("min_lr");
  o.weight_decay = real("weight_decay");
  o.momentum = real("momentum");
  o.warmup_steps = integer("warmup_steps");
  o.schedule = parse_lr_decay(text_of("schedule"));
  o.steps = integer("steps");
  o.clip_norm = real("clip_norm");
  validate(o);
  return o;
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
  set_num_threads(options_.threads);
}

Trainer::~Trainer() = default;

StepResult Trainer::train_step() {
  const int64_t update = step_ + 1;
  default_generator().set_step(static_cast<uint64_t>(update));
  const Batch batch = task_.train_batch(static_cast<uint64_t>(step_));
  model_.train();
  optimizer_->zero_grad();
  // logits: (B, T, V), targets: (B, T)
  const Variable loss = cross_entropy(model_(batch.inputs), batch.targets);
  StepResult r;
  r.loss = loss.item();
  r.lr = schedule_.at(step_);
  // Backward runs before the checks so that a diverged step's message can give its gradient
  // norm too; nothing is applied until all three have passed.
  loss.backward();
  r.grad_norm = options_.clip_norm > 0 ? clip_grad_norm(params_, options_.clip_norm) : grad_norm(params_);
  if (!std::isfinite(r.loss)) diverged(update, "the loss is " + number(r.loss), r.grad_norm, r.lr);
  if (first_loss_ == 0) first_loss_ = r.loss;
  if (r.loss > divergence_limit()) {
    diverged(update, "the loss " + number(r.loss) + " is more than " + number(kDivergenceFactor) +
                         " times the run's starting loss " + number(divergence_limit() / kDivergenceFactor),
             r.grad_norm, r.lr);
  }
  if (!std::isfinite(r.grad_norm)) diverged(update, "the gradient norm is " + number(r.grad_norm), r.grad_norm, r.lr);
  optimizer_->set_lr(r.lr);
  optimizer_->step();
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
    // The held-out set is generated in fixed batches; the model sees them in chunks of
    // eval_rows_, sized so that long sequences do not multiply evaluation memory.
    for (int64_t begin = 0; begin < rows; begin += eval_rows_) {
      const int64_t n = std::min(eval_rows_, rows - begin);
      const bool whole = begin == 0 && n == batch.inputs.shape[0];
      const Indices inputs = whole ? batch.inputs : row_range(batch.inputs, begin, n);
      const Indices targets = whole ? batch.targets : row_range(batch.targets, begin, n);
      total += sequence_metrics(model_(inputs).value(), targets);
    }
    remaining -= rows;
  }
  return total;
}

Indices Trainer::predict(const Indices& inputs) {
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model_);
  return predict_tokens(model_(inputs).value());
}

double Trainer::elapsed_s() const { return elapsed_before_s_ + (running_ ? seconds_since(run_start_) : 0.0); }

TrainSummary Trainer::run() {
  TrainSummary summary;
  stop_requested_.store(false);
  run_start_ = Clock::now();
  running_ = true;
  struct RunningFlag {
    Trainer& t;
    ~RunningFlag() {
      t.elapsed_before_s_ = t.elapsed_s();
      t.running_ = false;
    }
  } running_flag{*this};

  std::optional<MetricsLog> log;
  if (!outputs_.log_path.empty()) {
    if (resumed_) {
      log.emplace(MetricsLog::resume(outputs_.log_path, step_));
    } else {
      log.emplace(outputs_.log_path);
    }
  }
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
    if (last != nullptr && !(eval_loss <= divergence_limit())) {
      diverged(step_, "the held-out loss after it is " + number(eval_loss) + " (the limit is " +
                          number(divergence_limit()) + ")",
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
    row.elapsed_s = elapsed_s();
    window_loss_sum_ = 0;
    window_steps_ = 0;
    if (log) {
      log->append(row);
      if (!outputs_.plot_path.empty()) write_metrics_plot(outputs_.plot_path, log->rows(), {.title = outputs_.plot_title});
    }
    if (last != nullptr && !outputs_.checkpoint_path.empty()) {
      save_checkpoint(outputs_.checkpoint_path);
      last_saved_step_ = step_;
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

    const bool stop = stop_requested_.load();
    const double tokens_per_s = train_s > 0 ? static_cast<double>(summary.steps_this_run * tokens_per_step) / train_s : 0;
    summary.tokens_per_s = tokens_per_s;
    info.loss = window_loss_sum_ / static_cast<double>(window_steps_);
    if (step_ % options_.eval_every == 0 || step_ == options_.steps) {
      summary.reached_target = record(&r, tokens_per_s).seq_acc >= options_.target_seq_acc;
    } else if (stop && !outputs_.checkpoint_path.empty()) {
      save_checkpoint(outputs_.checkpoint_path);
      last_saved_step_ = step_;
    }
    if (display) {
      info.step = step_;
      info.tokens_per_s = tokens_per_s;
      info.elapsed_s = elapsed_s();
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
  summary.run_s = seconds_since(run_start_);
  summary.elapsed_s = elapsed_s();
  return summary;
}

std::map<std::string, std::string> Trainer::metadata() const {
  LoopState loop;
  loop.step = step_;
  loop.window_loss_sum = window_loss_sum_;
  loop.window_steps = window_steps_;
  loop.elapsed_s = elapsed_s();
  loop.first_loss = first_loss_;
  return {{"model", sequence_model_options_to_json(model_.options())},
          {"task", task_options_to_json(task_.options())},
          {"trainer", trainer_options_to_json(options_)},
          {"loop", loop_state_to_json(loop)}};
}

void Trainer::save_checkpoint(const std::string& path) const {
  ::ag::save_checkpoint(path, params_, *optimizer_, metadata(), default_generator().state(), static_cast<uint64_t>(step_));
}

CheckpointConfig read_checkpoint_config(const std::string& path) {
  const CheckpointInfo info = read_checkpoint_info(path);
  CheckpointConfig c;
  c.model = parse_entry(path, info, "model", sequence_model_options_from_json);
  c.task = parse_entry(path, info, "task", task_options_from_json);
  c.trainer = parse_entry(path, info, "trainer", [](const std::string& s) { return trainer_options_from_json(s); });
  const LoopState loop = parse_entry(path, info, "loop", loop_state_from_json);
  check_loop_step(path, loop, c.trainer, info);
  c.step = loop.step;
  return c;
}

void Trainer::resume(const std::string& path) {
  // Check the whole configuration before anything changes.
  const CheckpointInfo info = read_checkpoint_info(path);
  const auto require_same = [&](const char* key, const std::string& file_json, const std::string& ours) {
    if (file_json != ours) {
      throw std::runtime_error("checkpoint '" + path + "': its " + key + " configuration " + file_json +
                               " differs from this trainer's " + ours);
    }
  };
  require_same("model",
               sequence_model_options_to_json(parse_entry(path, info, "model", sequence_model_options_from_json)),
               sequence_model_options_to_json(model_.options()));
  require_same("task", task_options_to_json(parse_entry(path, info, "task", task_options_from_json)),
               task_options_to_json(task_.options()));
  require_same("trainer",
               trainer_options_to_json(parse_entry(path, info, "trainer",
                                                   [](const std::string& s) { return trainer_options_from_json(s); })),
               trainer_options_to_json(options_));
  const LoopState loop = parse_entry(path, info, "loop", loop_state_from_json);
  check_loop_step(path, loop, options_, info);

  const CheckpointInfo loaded = load_checkpoint(path, params_, *optimizer_);
  default_generator().set_state(loaded.rng_state);
  step_ = loop.step;
  window_loss_sum_ = loop.window_loss_sum;
  window_steps_ = loop.window_steps;
  elapsed_before_s_ = loop.elapsed_s;
  first_loss_ = loop.first_loss;
  last_saved_step_ = step_;
  resumed_ = true;
}

}  // namespace ag
