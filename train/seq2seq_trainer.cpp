#include "attograd/train/seq2seq_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/core/format.h"
#include "attograd/core/rng.h"
#include "attograd/core/threads.h"
#include "attograd/train/losses.h"
#include "attograd/train/metrics_log.h"
#include "attograd/train/plot.h"
#include "attograd/train/progress.h"

namespace ag {

// request_stop() runs in signal handlers, where only lock-free atomics are safe.
static_assert(std::atomic<bool>::is_always_lock_free);

namespace {

using Clock = std::chrono::steady_clock;

// The held-out set is generated in batches of at most this many sources, so that it does not
// depend on the training batch size.
constexpr int64_t kHeldOutBatch = 256;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Validates every option first, so that a bad one is reported by its own name.
LrScheduleOptions checked_schedule_options(const TrainerOptions& o) {
  validate(o);
  return schedule_options(o);
}

Seq2SeqTaskOptions with_batch(Seq2SeqTaskOptions task, int64_t batch) {
  task.batch_size = batch;
  return task;
}

// Rows [0, rows) of a padded batch; the widths stay (padding is inert).
Seq2SeqBatch first_rows(const Seq2SeqBatch& b, int64_t rows) {
  const auto take = [&](const Indices& x) {
    const int64_t t = x.shape[1];
    return Indices(Shape{rows, t}, std::vector<int64_t>(x.data.begin(), x.data.begin() + rows * t));
  };
  return {take(b.src), std::vector<int64_t>(b.src_lengths.begin(), b.src_lengths.begin() + rows), take(b.tgt_in),
          take(b.tgt_out), std::vector<int64_t>(b.tgt_lengths.begin(), b.tgt_lengths.begin() + rows)};
}

int64_t real_tokens(const Seq2SeqBatch& b) {
  int64_t n = 0;
  for (int64_t l : b.src_lengths) n += l;
  for (int64_t l : b.tgt_lengths) n += l;
  return n;
}

void check_fits(const Seq2SeqOptions& m, const Seq2SeqTask& task) {
  const int64_t longest = std::max(task.max_source_len(), task.max_target_len() + 1);
  if (m.src_vocab != task.vocab_size() || m.tgt_vocab != task.vocab_size() || m.max_len < longest) {
    throw std::invalid_argument("Seq2SeqTrainer: the model (src_vocab " + std::to_string(m.src_vocab) + ", tgt_vocab " +
                                std::to_string(m.tgt_vocab) + ", max_len " + std::to_string(m.max_len) +
                                ") does not fit the task " + seq2seq_task_name(task.options().kind) + " (vocab " +
                                std::to_string(task.vocab_size()) + ", sequences up to " + std::to_string(longest) +
                                " tokens with eos)");
  }
}

}  // namespace

double Seq2SeqMetrics::exact_accuracy() const {
  return sequences > 0 ? static_cast<double>(exact) / static_cast<double>(sequences) : 0.0;
}

double Seq2SeqMetrics::sequences_per_s() const {
  return decode_s > 0 ? static_cast<double>(sequences) / decode_s : 0.0;
}

std::vector<int64_t> target_of(const Seq2SeqBatch& b, int64_t row) {
  const int64_t T = b.tgt_out.shape[1];
  const auto begin = b.tgt_out.data.begin() + row * T;
  return std::vector<int64_t>(begin, begin + (b.tgt_lengths.at(static_cast<size_t>(row)) - 1));
}

std::vector<int64_t> source_of(const Seq2SeqBatch& b, int64_t row) {
  const int64_t S = b.src.shape[1];
  const auto begin = b.src.data.begin() + row * S;
  return std::vector<int64_t>(begin, begin + b.src_lengths.at(static_cast<size_t>(row)));
}

Seq2SeqTrainer::Seq2SeqTrainer(Seq2Seq& model, const Seq2SeqTaskOptions& task, const TrainerOptions& options,
                               TrainerOutputs outputs)
    : model_(model),
      task_(task),
      options_(options),
      outputs_(std::move(outputs)),
      params_(model.named_parameters()),
      schedule_(checked_schedule_options(options)) {
  check_fits(model.options(), task_);
  if (options_.communicator != nullptr && options_.communicator->size() > 1) {
    throw std::invalid_argument("Seq2SeqTrainer: trains in one process; a run over " +
                                std::to_string(options_.communicator->size()) + " processes is not supported");
  }
  if (!outputs_.plot_path.empty() && outputs_.log_path.empty()) {
    throw std::logic_error("Seq2SeqTrainer: plot_path '" + outputs_.plot_path + "' needs a log_path");
  }
  const Seq2SeqTask held_out_task(with_batch(task, std::min(options_.eval_sequences, kHeldOutBatch)));
  for (int64_t left = options_.eval_sequences, i = 0; left > 0; ++i) {
    Seq2SeqBatch b = held_out_task.eval_batch(static_cast<uint64_t>(i));
    const int64_t rows = std::min(left, b.src.shape[0]);
    held_out_.push_back(rows == b.src.shape[0] ? std::move(b) : first_rows(b, rows));
    left -= rows;
  }
  optimizer_ = make_optimizer(params_, options_);
  guard_ = {.trainer = "Seq2SeqTrainer", .peak_lr = options_.lr, .clip_norm = options_.clip_norm,
            .warmup_steps = options_.warmup_steps, .vocab = task_.vocab_size(),
            .checkpoint_path = outputs_.checkpoint_path};
  set_num_threads(options_.threads);
}

Seq2SeqTrainer::~Seq2SeqTrainer() = default;

StepResult Seq2SeqTrainer::train_step() {
  const int64_t update = step_ + 1;
  default_generator().set_step(static_cast<uint64_t>(update));
  const Seq2SeqBatch b = task_.train_batch(static_cast<uint64_t>(step_));
  last_batch_tokens_ = real_tokens(b);
  model_.train();
  optimizer_->zero_grad();
  // logits (B, T, V) against tgt_out (B, T): the mean over the real target tokens.
  const Variable loss = cross_entropy(model_(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths), b.tgt_out,
                                      {.ignore_index = kSeq2SeqIgnore});
  const StepResult r = checked_update(loss, params_, *optimizer_, schedule_.at(step_), guard_, update);
  step_ = update;
  return r;
}

Seq2SeqDecodeOptions Seq2SeqTrainer::decode_options() const {
  Seq2SeqDecodeOptions o;
  o.bos = kBosToken;
  o.eos = kEosToken;
  o.max_tokens = task_.max_target_len() + 1;
  return o;
}

Seq2SeqMetrics Seq2SeqTrainer::decode_held_out(const Seq2SeqDecodeOptions& options, bool beam, int64_t sources) {
  Seq2SeqMetrics m;
  int64_t left = sources > 0 ? sources : options_.eval_sequences;
  for (const Seq2SeqBatch& whole : held_out_) {
    if (left <= 0) break;
    const Seq2SeqBatch b = left < whole.src.shape[0] ? first_rows(whole, left) : whole;
    const Clock::time_point t0 = Clock::now();
    const std::vector<Hypothesis> out = beam ? beam_search(model_, b.src, b.src_lengths, options)
                                             : greedy_decode(model_, b.src, b.src_lengths, options);
    m.decode_s += seconds_since(t0);
    for (int64_t r = 0; r < b.src.shape[0]; ++r) {
      const Hypothesis& h = out[static_cast<size_t>(r)];
      m.exact += h.ended && h.tokens == target_of(b, r) ? 1 : 0;
    }
    m.sequences += b.src.shape[0];
    left -= b.src.shape[0];
  }
  return m;
}

Seq2SeqMetrics Seq2SeqTrainer::evaluate() {
  SequenceMetrics teacher;
  {
    NoGradGuard no_grad;
    EvalModeGuard eval_mode(model_);
    for (const Seq2SeqBatch& b : held_out_) {
      teacher += seq2seq_metrics(model_(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths).value(), b.tgt_out);
    }
  }
  Seq2SeqMetrics m = decode_held_out(decode_options(), /*beam=*/false);
  m.teacher = teacher;
  return m;
}

Seq2SeqTrainSummary Seq2SeqTrainer::run() {
  Seq2SeqTrainSummary summary;
  stop_requested_.store(false);
  const RunClock::Session session = clock_.start();

  std::optional<MetricsLog> log = open_metrics_log(outputs_.log_path, resumed_, step_);
  std::optional<ProgressDisplay> display;
  if (outputs_.progress != nullptr) display.emplace(*outputs_.progress, outputs_.interactive, options_.eval_every);
  ProgressInfo info;
  info.total_steps = options_.steps;
  bool have_eval = false;

  // Evaluates, closes the metrics window into a row, writes the log, the plot and (after an
  // update) the checkpoint. `last` is the update just made, null before the first one.
  const auto record = [&](const StepResult* last, double tokens_per_s) {
    summary.eval = evaluate();
    have_eval = true;
    const double eval_loss = summary.eval.teacher.loss();
    // Parameters that make the held-out loss explode are not saved over the last good ones.
    if (last != nullptr && !(eval_loss <= guard_.limit())) {
      guard_.diverged(step_, "the held-out loss after it is " + format_number(eval_loss), last->grad_norm, last->lr);
    }
    MetricsRow row;
    row.step = step_;
    if (window_steps_ > 0) row.train_loss = window_loss_sum_ / static_cast<double>(window_steps_);
    row.eval_loss = eval_loss;
    row.token_acc = summary.eval.teacher.token_accuracy();
    row.seq_acc = summary.eval.exact_accuracy();
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
    if (display) {
      std::ostringstream line;
      line.setf(std::ios::fixed);
      line.precision(4);
      line << "step " << step_ << ": held-out loss " << row.eval_loss;
      line.precision(1);
      line << ", token acc " << 100 * row.token_acc << "% (teacher-forced), greedy exact " << 100 * row.seq_acc << "% of "
           << summary.eval.sequences;
      display->message(line.str());
    }
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
    tokens += last_batch_tokens_;
    ++summary.steps_this_run;
    window_loss_sum_ += r.loss;
    ++window_steps_;
    if (outputs_.on_step) outputs_.on_step(step_, r.loss);

    const bool stop = stop_requested_.load();
    const double tokens_per_s = train_s > 0 ? static_cast<double>(tokens) / train_s : 0;
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
