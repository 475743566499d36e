// Seq2SeqJob: an encoder-decoder's part of a training run (train/job.h): a Seq2Seq model
// (models/seq2seq/seq2seq.h) learns a generated variable-length task (models/seq2seq/seq2seq_tasks.h)
// until it decodes held-out sources exactly.
//
//   manual_seed(seed);
//   Seq2Seq model(model_options);                        // vocab and max_len fit the task
//   Seq2SeqJob job(model, task_options);
//   Trainer trainer(job, {.lr = 1e-3, .steps = 3000});   // stops at 99% exact decodes
//
// Batch n is task.train_batch(n), padded to its longest source and target. The loss is the
// cross-entropy of logits (B, T, V) against tgt_out, the mean over the real target tokens
// (padding is kSeq2SeqIgnore). Over several processes each rank's mean is weighted by its share
// of the batch's real target tokens, so that the average over ranks is the whole batch's mean.
//
// An evaluation runs a fixed held-out set of eval_sequences sources:
//   teacher-forced  the loss and the token accuracy over the real target tokens, as in training;
//   decoded         greedy decoding from bos (models/seq2seq/seq2seq_decode.h); a source counts as exact
//                   when the output is its target token for token and ends with eos.
// The exact-match rate is the evaluation's seq_acc, what the target accuracy is compared with:
// what a user of the model gets, not the teacher-forced score (which sees the true previous
// tokens and so overstates it). Checkpoint entries: "model" and "task".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attograd/models/seq2seq/seq2seq.h"
#include "attograd/models/seq2seq/seq2seq_decode.h"
#include "attograd/models/seq2seq/seq2seq_tasks.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/job.h"

namespace ag {

// What an evaluation on held-out sources found.
struct Seq2SeqMetrics {
  SequenceMetrics teacher;  // teacher-forced loss, token and sequence accuracy (real tokens only)
  int64_t sequences = 0;    // sources decoded
  int64_t exact = 0;        // decoded to their target exactly, eos included
  double decode_s = 0;      // wall time of the decoding (this process's share)

  double exact_accuracy() const;   // exact / sequences, in [0, 1]
  double sequences_per_s() const;  // decoded sources per second of decoding
};

class Seq2SeqJob : public TrainingJob {
 public:
  // The model must outlive the job and fit the task: src_vocab == tgt_vocab ==
  // task.vocab_size() and max_len >= the longest source and the longest target plus eos;
  // eval_sequences in [1, TrainerLimits::eval_sequences] (std::invalid_argument naming them).
  Seq2SeqJob(Seq2Seq& model, const Seq2SeqTaskOptions& task, int64_t eval_sequences = 512);

  StepLoss loss(uint64_t index, const Shard& rows) override;
  Evaluation evaluate(const Ranks& ranks) override;
  std::map<std::string, std::string> metadata() const override;
  void set_recompute(bool on) override { model_.set_recompute(on); }

  // The last evaluation's counts (teacher-forced and decoded), summed over processes.
  const Seq2SeqMetrics& last_metrics() const { return last_; }
  // Decodes the first `sources` held-out sources (all of them when 0) in this process, with
  // greedy decoding (options.beam is ignored) or beam search; teacher is left empty. The caller
  // puts the model in eval mode.
  Seq2SeqMetrics decode_held_out(const Seq2SeqDecodeOptions& options, bool beam, int64_t sources = 0);
  // The decoding options of this task: its bos and eos, max_tokens its longest target plus eos.
  Seq2SeqDecodeOptions decode_options() const;

  const Seq2SeqTask& task() const { return task_; }
  // The held-out set, in batches of at most 256 sources.
  const std::vector<Seq2SeqBatch>& held_out() const { return held_out_; }

 private:
  Seq2SeqMetrics decode(const Seq2SeqBatch& batch, const Seq2SeqDecodeOptions& options, bool beam);

  Seq2Seq& model_;
  Seq2SeqTask task_;
  int64_t eval_sequences_;
  std::vector<Seq2SeqBatch> held_out_;
  Seq2SeqMetrics last_;
};

// The target content of row `row` of a batch: tgt_out up to (not including) its eos.
std::vector<int64_t> target_of(const Seq2SeqBatch& batch, int64_t row);
// The source of row `row`, without its padding.
std::vector<int64_t> source_of(const Seq2SeqBatch& batch, int64_t row);
// Rows [rows.begin, rows.begin + rows.rows) of a padded batch; the widths stay (padding is inert).
Seq2SeqBatch padded_rows(const Seq2SeqBatch& batch, const Shard& rows);

}  // namespace ag
