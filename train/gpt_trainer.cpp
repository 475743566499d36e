#include "attograd/train/gpt_trainer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/core/format.h"
#include "attograd/core/rng.h"
#include "attograd/core/threads.h"
#include "attograd/models/generate.h"
#include "attograd/train/clip.h"
#include "attograd/train/crc32c.h"
#include "attograd/train/json_text.h"
#include "attograd/train/losses.h"
#include "attograd/train/metrics_log.h"
#include "attograd/train/plot.h"
#include "attograd/train/progress.h"

namespace ag {

// request_stop() runs in signal handlers, where only lock-free atomics are safe.
static_assert(std::atomic<bool>::is_always_lock_free);

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Validates every option first, so that a bad one is reported by its own name.
LrScheduleOptions checked_schedule(const GPTTrainerOptions& o) {
  validate(o);
  return {.lr = o.lr, .min_lr = o.min_lr, .warmup_steps = o.warmup_steps, .total_steps = o.steps,
          .decay = LrDecay::cosine};
}

// A fingerprint of the token stream: resuming on another text (or another tokenisation of it)
// would silently train a different run.
std::string data_fingerprint(const std::vector<int64_t>& tokens) {
  const uint32_t crc = crc32c(tokens.data(), tokens.size() * sizeof(int64_t));
  return OrderedJson({{"tokens", tokens.size()}, {"crc32c", crc}}).dump();
}

void check_long_enough(const char* part, size_t tokens, int64_t block_size) {
  if (static_cast<int64_t>(tokens) < block_size + 1) {
    throw std::invalid_argument(std::string("GPTTrainer: the ") + part + " text has " + std::to_string(tokens) +
                                " tokens, fewer than block_size + 1 = " + std::to_string(block_size + 1) +
                                " (lower the block size or give more text)");
  }
}

}  // namespace

GPTTrainer::GPTTrainer(GPT& model, Tokenizer tokenizer, const std::vector<int64_t>& tokens,
                       const GPTTrainerOptions& options, GPTTrainerOutputs outputs)
    : model_(model),
      tokenizer_(std::move(tokenizer)),
      options_(options),
      outputs_(std::move(outputs)),
      params_(model.named_parameters()),
      schedule_(checked_schedule(options)) {
  const GPTOptions& m = model.options();
  if (m.vocab != tokenizer_.vocab_size()) {
    throw std::invalid_argument("GPTTrainer: the model's vocab " + std::to_string(m.vocab) + " differs from the " +
                                tokenizer_.kind_name() + " tokenizer's " + std::to_string(tokenizer_.vocab_size()));
  }
  if (!outputs_.plot_path.empty() && outputs_.log_path.empty()) {
    throw std::logic_error("GPTTrainer: plot_path '" + outputs_.plot_path + "' needs a log_path");
  }
  check_long_enough("whole", tokens.size(), m.block_size);
  data_ = split_tokens(tokens, options_.train_fraction);
  check_long_enough("training part of the", data_.train.size(), m.block_size);
  check_long_enough("validation part of the", data_.val.size(), m.block_size);
  data_json_ = data_fingerprint(tokens);
  eval_ = eval_batches(data_.val, {.batch = options_.batch, .block_size = m.block_size}, options_.eval_windows);
  try {
    prompt_ = tokenizer_.encode(options_.sample_prompt);
  } catch (const std::invalid_argument&) {
    prompt_.clear();
  }
  if (prompt_.empty() || static_cast<int64_t>(prompt_.size()) > m.block_size) prompt_ = {data_.train.front()};
  optimizer_ = std::make_unique<AdamW>(params_, AdamWOptions{.lr = options_.lr, .weight_decay = options_.weight_decay});
  guard_ = {.trainer = "GPTTrainer", .peak_lr = options_.lr, .clip_norm = options_.clip_norm,
            .warmup_steps = options_.warmup_steps, .vocab = model_.options().vocab,
            .checkpoint_path = outputs_.checkpoint_path};
  set_num_threads(options_.threads);
  shard_ = {.begin = 0, .rows = options_.batch};
  if (Communicator* comm = options_.communicator; comm != nullptr && comm->size() > 1) {
    // Checked before the first collective, by every rank alike.
    shard_ = shard_of(options_.batch, comm->rank(), comm->size(), "--batch");
    data_parallel_ = std::make_unique<DataParallel>(params_, *comm);
    data_parallel_->broadcast_parameters();
  }
}

GPTTrainer::~GPTTrainer() = default;

StepResult GPTTrainer::train_step() {
  const int64_t update = step_ + 1;
  default_generator().set_step(data_parallel_ ? data_parallel_->dropout_step(update) : static_cast<uint64_t>(update));
  const TextBatch batch =
      sample_batch(data_.train, {.batch = options_.batch, .block_size = model_.options().block_size}, options_.seed,
                   step_);
  model_.train();
  optimizer_->zero_grad();
  // logits (B, T, V) against targets (B, T): the mean over B*T next-token predictions.
  // Over several processes, this rank's rows of the batch (every rank draws the whole batch).
  const Variable loss = data_parallel_ ? cross_entropy(model_(shard_rows(batch.inputs, shard_)), shard_rows(batch.targets, shard_))
                                       : cross_entropy(model_(batch.inputs), batch.targets);
  const StepResult r =
      checked_update(loss, params_, *optimizer_, schedule_.at(step_), guard_, update, data_parallel_.get());
  step_ = update;
  return r;
}

double GPTTrainer::evaluate() {
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model_);
  double sum = 0;
  int64_t rows = 0;
  const int64_t rank = data_parallel_ ? data_parallel_->rank() : 0, ranks = data_parallel_ ? data_parallel_->size() : 1;
  for (const TextBatch& b : eval_) {
    // Each batch's loss is a mean over its rows; weighting by rows makes the result the mean
    // over every validation token even when the last batch is short.
    const int64_t all = b.inputs.shape[0];
    if (!data_parallel_) {
      sum += cross_entropy(model_(b.inputs), b.targets).item() * static_cast<double>(all);
      rows += all;
      continue;
    }
    // Over several processes each rank takes its contiguous part of every batch.
    const Shard part{.begin = all * rank / ranks, .rows = all * (rank + 1) / ranks - all * rank / ranks};
    if (part.rows == 0) continue;
    sum += cross_entropy(model_(shard_rows(b.inputs, part)), shard_rows(b.targets, part)).item() *
           static_cast<double>(part.rows);
    rows += part.rows;
  }
  if (data_parallel_) {
    std::vector<double> v{sum, static_cast<double>(rows)};
    data_parallel_->sum(v);
    sum = v[0];
    rows = static_cast<int64_t>(v[1]);
  }
  return sum / static_cast<double>(rows);
}

std::string GPTTrainer::sample() {
  // Over several processes only rank 0 shows a sample.
  if (options_.sample_tokens == 0 || (data_parallel_ && data_parallel_->rank() != 0)) return {};
  // generate() switches to eval mode (no dropout, so no draws from the default generator) and
  // samples from its own counter-based stream; the guard keeps even that assumption out of the
  // trajectory.
  GeneratorStateGuard keep_generator;
  GenerateOptions g;
  g.max_new_tokens = options_.sample_tokens;
  g.sampling = {.temperature = 0.8, .top_k = 40, .top_p = 1.0, .seed = options_.seed};
  return tokenizer_.decode(prompt_) + tokenizer_.decode(generate(model_, prompt_, g));
}

GPTTrainSummary GPTTrainer::run() {
  GPTTrainSummary summary;
  stop_requested_.store(false);
  const RunClock::Session session = clock_.start();

  std::optional<MetricsLog> log = open_metrics_log(outputs_.log_path, resumed_, step_);
  std::optional<ProgressDisplay> display;
  if (outputs_.progress != nullptr) display.emplace(*outputs_.progress, outputs_.interactive, options_.eval_every);
  ProgressInfo info;
  info.total_steps = options_.steps;

  // Evaluates, closes the metrics window into a row, writes log, plot, checkpoint, and shows
  // the validation loss and a sample. `last` is the update just made, null before the first.
  const auto record = [&](const StepResult* last, double tokens_per_s) {
    summary.val_loss = evaluate();
    // Parameters that make the validation loss explode are not saved over the last good ones.
    if (last != nullptr && !(summary.val_loss <= guard_.limit())) {
      guard_.diverged(step_, "the validation loss after it is " + format_number(summary.val_loss), last->grad_norm, last->lr);
    }
    MetricsRow row;
    row.step = step_;
    if (window_steps_ > 0) row.train_loss = window_loss_sum_ / static_cast<double>(window_steps_);
    row.eval_loss = summary.val_loss;
    if (last != nullptr) {
      row.lr = last->lr;
      row.grad_norm = last->grad_norm;
      row.tokens_per_s = tokens_per_s;
    }
    row.elapsed_s = clock_.total_s();
    summary.train_loss = row.train_loss;
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
    summary.sample = sample();
    if (display) {
      std::ostringstream line;
      line.setf(std::ios::fixed);
      line.precision(4);
      line << "step " << step_ << ": validation loss " << row.eval_loss;
      if (!std::isnan(row.train_loss)) line << ", train loss " << row.train_loss;
      display->message(line.str());
      if (!summary.sample.empty()) {
        // Indented line by line, so the sample stands apart from the progress lines.
        // (A prompt of "\n" would open with an empty line: skipped.)
        std::istringstream text(summary.sample.substr(summary.sample.find_first_not_of('\n') == std::string::npos
                                                          ? summary.sample.size()
                                                          : summary.sample.find_first_not_of('\n')));
        for (std::string l; std::getline(text, l);) display->message("    | " + l);
      }
    }
  };

  // A fresh run starts its log with the untrained model: the baseline every curve starts from.
  if (step_ == 0 && !resumed_ && step_ < options_.steps) record(nullptr, 0.0);

  const int64_t tokens_per_step = options_.batch * model_.options().block_size;
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
    const double tokens_per_s =
        train_s > 0 ? static_cast<double>(summary.steps_this_run * tokens_per_step) / train_s : 0;
    summary.tokens_per_s = tokens_per_s;
    info.loss = window_loss_sum_ / static_cast<double>(window_steps_);
    info.val_loss = summary.val_loss;  // the evaluation before this step (NaN before the first)
    if (display) {
      info.step = step_;
      info.tokens_per_s = tokens_per_s;
      info.elapsed_s = clock_.total_s();
      display->update(info);
    }
    if (step_ % options_.eval_every == 0 || step_ == options_.steps) {
      record(&r, tokens_per_s);
    } else if (stop && !outputs_.checkpoint_path.empty()) {
      save_checkpoint(outputs_.checkpoint_path);
      guard_.last_saved_step = step_;
    }
    if (stop) {
      summary.interrupted = step_ < options_.steps;  // a stop at the very last update changes nothing
      break;
    }
  }
  if (display) display->finish();
  summary.steps = step_;
  summary.run_s = clock_.session_s();
  summary.elapsed_s = clock_.total_s();
  return summary;
}

}  // namespace ag
