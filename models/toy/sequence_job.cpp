#include "attograd/models/toy/sequence_job.h"

#include <algorithm>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/models/toy/sequence_memory.h"
#include "attograd/models/toy/sequence_options.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/losses.h"
#include "attograd/train/trainer.h"

namespace ag {

namespace {

// Held-out sequences are generated in batches of at most this many rows: the held-out set then
// does not depend on the training batch size.
constexpr int64_t kEvalBatch = 256;

SequenceTaskOptions with_batch(SequenceTaskOptions task, int64_t batch) {
  task.batch_size = batch;
  return task;
}

int64_t checked_eval_sequences(int64_t n) {
  if (n < 1 || n > TrainerLimits::eval_sequences) {
    throw std::invalid_argument("SequenceJob: eval_sequences must lie in [1, " +
                                std::to_string(TrainerLimits::eval_sequences) + "], got " + std::to_string(n));
  }
  return n;
}

// Rows [begin, begin + rows) of a (B, T) batch.
Indices row_range(const Indices& x, int64_t begin, int64_t rows) {
  const int64_t t = x.shape[1];
  return Indices(Shape{rows, t}, std::vector<int64_t>(x.data.begin() + begin * t, x.data.begin() + (begin + rows) * t));
}

}  // namespace

SequenceJob::SequenceJob(SequenceModel& model, const SequenceTaskOptions& task, int64_t eval_sequences)
    : TrainingJob("sequence", model, task.batch_size, task.vocab_size),
      model_(model),
      task_(task),
      eval_task_(with_batch(task, std::min(checked_eval_sequences(eval_sequences), kEvalBatch))),
      eval_sequences_(eval_sequences) {
  const SequenceModelOptions& m = model.options();
  if (m.vocab != task.vocab_size || m.max_len < task.seq_len) {
    throw std::invalid_argument("SequenceJob: the model (vocab " + std::to_string(m.vocab) + ", max_len " +
                                std::to_string(m.max_len) + ") does not fit the task (vocab " +
                                std::to_string(task.vocab_size) + ", seq_len " + std::to_string(task.seq_len) + ")");
  }
  eval_rows_ = eval_rows_for(m, task, eval_task_.options().batch_size);
}

StepLoss SequenceJob::loss(uint64_t index, const Shard& rows) {
  const SequenceBatch batch = task_.train_batch(index);
  const SequenceTaskOptions& t = task_.options();
  const bool whole = rows.begin == 0 && rows.rows == t.batch_size;
  // logits: (B, T, V), targets: (B, T); over several processes, this rank's rows of the batch
  const Variable loss = whole ? cross_entropy(model_(batch.inputs), batch.targets)
                              : cross_entropy(model_(shard_rows(batch.inputs, rows)), shard_rows(batch.targets, rows));
  return {.loss = loss, .tokens = t.batch_size * t.seq_len};
}

Evaluation SequenceJob::evaluate(const Ranks& ranks) {
  SequenceMetrics total;
  int64_t remaining = eval_sequences_;
  for (uint64_t i = 0; remaining > 0; ++i) {
    const SequenceBatch batch = eval_task_.eval_batch(i);
    const int64_t rows = std::min(remaining, batch.inputs.shape[0]);
    const Shard part = ranks.part(rows);
    for (int64_t begin = part.begin; begin < part.begin + part.rows; begin += eval_rows_) {
      const int64_t n = std::min(eval_rows_, part.begin + part.rows - begin);
      const bool whole = begin == 0 && n == batch.inputs.shape[0];
      const Indices inputs = whole ? batch.inputs : row_range(batch.inputs, begin, n);
      const Indices targets = whole ? batch.targets : row_range(batch.targets, begin, n);
      total += sequence_metrics(model_(inputs).value(), targets);
    }
    remaining -= rows;
  }
  if (ranks.size() > 1) {
    std::vector<double> v{total.loss_sum, static_cast<double>(total.tokens), static_cast<double>(total.correct_tokens),
                          static_cast<double>(total.sequences), static_cast<double>(total.correct_sequences)};
    ranks.sum(v);  // counts below 2^53 add exactly in double
    total = {.loss_sum = v[0], .tokens = static_cast<int64_t>(v[1]), .correct_tokens = static_cast<int64_t>(v[2]),
             .sequences = static_cast<int64_t>(v[3]), .correct_sequences = static_cast<int64_t>(v[4])};
  }
  last_ = total;
  return accuracy_evaluation(total.loss(), total.token_accuracy(), total.sequence_accuracy(), "", "sequence acc", "");
}

Indices SequenceJob::predict(const Indices& inputs) {
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model_);
  return predict_tokens(model_(inputs).value());
}

std::map<std::string, std::string> SequenceJob::metadata() const {
  return {{"model", sequence_model_options_to_json(model_.options())},
          {"task", sequence_task_options_to_json(task_.options())}};
}

}  // namespace ag
