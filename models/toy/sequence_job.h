// SequenceJob: the toy tagger's part of a training run (train/job.h): an encoder-only
// SequenceModel learns a generated sequence task (models/toy/sequence_tasks.h), one target
// token per input token.
//
//   manual_seed(seed);
//   SequenceModel model(model_options);                  // vocab and max_len fit the task
//   SequenceJob job(model, task_options);
//   Trainer trainer(job, {.lr = 3e-3, .steps = 2000}); // stops at 99% exact sequences
//
// Batch n is task.train_batch(n): a pure function of (seed, n). The loss is the cross-entropy
// of logits (B, T, V) against targets (B, T). An evaluation runs eval_sequences held-out
// sequences (loss, token accuracy, exact-sequence accuracy); the held-out set is generated in
// batches of at most 256, so it does not depend on the training batch size, and the model sees
// it in chunks sized so that long sequences do not multiply evaluation memory (train/memory.h).
// Checkpoint entries: "model" (the model's options) and "task".
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "attograd/core/indices.h"
#include "attograd/models/toy/sequence_model.h"
#include "attograd/models/toy/sequence_tasks.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/job.h"

namespace ag {

class SequenceJob : public TrainingJob {
 public:
  // The model must outlive the job and fit the task (vocab, max_len >= seq_len), and
  // eval_sequences lie in [1, TrainerLimits::eval_sequences]: std::invalid_argument otherwise.
  SequenceJob(SequenceModel& model, const SequenceTaskOptions& task, int64_t eval_sequences = 512);

  StepLoss loss(uint64_t index, const Shard& rows) override;
  Evaluation evaluate(const Ranks& ranks) override;
  std::map<std::string, std::string> metadata() const override;
  void set_recompute(bool on) override { model_.encoder().set_recompute(on); }

  // The last evaluation's counts, summed over processes.
  const SequenceMetrics& last_metrics() const { return last_; }
  // Argmax predictions, inputs (B, T) -> (B, T), in eval mode.
  Indices predict(const Indices& inputs);
  const SequenceTask& task() const { return task_; }
  int64_t eval_sequences() const { return eval_sequences_; }

 private:
  SequenceModel& model_;
  SequenceTask task_;
  SequenceTask eval_task_;  // the task with the evaluation batch size
  int64_t eval_sequences_;
  int64_t eval_rows_ = 1;   // held-out rows per forward pass
  SequenceMetrics last_;
};

}  // namespace ag
