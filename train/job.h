// TrainingJob: what one kind of model brings to the one training loop (train/trainer.h).
//
// The loop owns everything every run shares: the optimizer and its schedule, clipping, the
// divergence guard, the gradient average over processes, the evaluation cadence, progress,
// metrics log, plot, stopping, checkpoints and bit-exact resume. A job owns what differs: the
// model, where its batches come from, how a batch becomes a loss, and what an evaluation
// measures. Three jobs ship with the library, one short file each:
//
//   SequenceJob  (models/toy/sequence_job.h)  an encoder tagger on a generated toy task
//   LanguageModelJob (text/lm_job.h)          a language model of any family on a token stream
//   Seq2SeqJob   (models/seq2seq/seq2seq_job.h)   an encoder-decoder on generated variable-length pairs
//
// A new kind of model needs a new job (and nothing in the loop): implement the few functions
// below, in the contract they state.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attograd/autograd/variable.h"
#include "attograd/layers/module.h"
#include "attograd/train/dist/data_parallel.h"

namespace ag {

// The loss of this process's rows of one training batch.
struct StepLoss {
  Variable loss;       // scalar; its gradient, averaged over processes, is the whole batch's
  int64_t tokens = 0;  // the tokens the whole batch trains on (for tokens/s)
};

// What an evaluation on held-out data found. NaN marks what a kind does not measure.
struct Evaluation {
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  double loss = kNone;       // mean cross-entropy per held-out token, nats
  // The same held-out loss in bits per byte of text: total nats / ln 2 / the UTF-8 bytes of
  // the predicted tokens (language models), comparable across tokenizers.
  double bits_per_byte = kNone;
  double token_acc = kNone;  // in [0, 1]
  double seq_acc = kNone;    // in [0, 1]: what the run's target accuracy is compared with
  // The sliding-window perplexity of the held-out text (train/text_score.h), when asked for:
  // mean nats per scored token and bits per byte.
  double sliding_loss = kNone;
  double sliding_bits_per_byte = kNone;
  std::string summary;       // one line for the person watching, e.g. "held-out loss 0.1234, ..."
  std::vector<std::string> details;  // lines shown below it, e.g. a generated sample
};

// The evaluation of a held-out loss and two accuracies, summarised for the progress line as
// "held-out loss 0.1234, token acc 99.1%<token_note>, <seq_name> 98.0%<tail>".
Evaluation accuracy_evaluation(double loss, double token_acc, double seq_acc, const std::string& token_note,
                               const std::string& seq_name, const std::string& tail);

// This process's place in a run over several (one process alone: rank 0 of 1).
class Ranks {
 public:
  Ranks() = default;
  explicit Ranks(DataParallel* data_parallel) : data_parallel_(data_parallel) {}
  // The processes of `communicator` outside a training run (an evaluation program).
  explicit Ranks(Communicator* communicator) : communicator_(communicator) {}

  int rank() const { return data_parallel_ ? data_parallel_->rank() : communicator_ ? communicator_->rank() : 0; }
  int size() const { return data_parallel_ ? data_parallel_->size() : communicator_ ? communicator_->size() : 1; }
  // This rank's contiguous part of `rows` rows: [rows * r / N, rows * (r + 1) / N).
  Shard part(int64_t rows) const;
  // Sums `values` elementwise over the ranks (every rank gets the sums); alone, leaves them.
  void sum(std::vector<double>& values) const;

 private:
  DataParallel* data_parallel_ = nullptr;
  Communicator* communicator_ = nullptr;
};

class TrainingJob {
 public:
  // kind: the checkpoint's "model_kind" ("sequence", "gpt", "seq2seq"). batch_rows: the rows of
  // one training batch; over N processes each rank trains on its B / N of them (B must divide:
  // the loop refuses other counts by name). vocab: the size of the output vocabulary; ln(vocab)
  // is a uniform guess's loss, the divergence guard's floor.
  TrainingJob(std::string kind, Module& model, int64_t batch_rows, int64_t vocab)
      : kind_(std::move(kind)), model_(model), batch_rows_(batch_rows), vocab_(vocab) {}
  virtual ~TrainingJob() = default;

  const std::string& kind() const { return kind_; }
  Module& model() { return model_; }
  int64_t batch_rows() const { return batch_rows_; }
  int64_t vocab() const { return vocab_; }

  // Training batch number `index` (the data position: a resumed run asks for the very batches
  // of an uninterrupted one), restricted to `rows`: the loss with its graph. The loop has put
  // the model in train mode and zeroed the gradients. Every rank draws the whole batch and
  // takes its rows; the loss must be scaled so that the mean of the ranks' gradients is the
  // whole batch's gradient.
  virtual StepLoss loss(uint64_t index, const Shard& rows) = 0;
  // Held-out metrics, in eval mode and without a graph (the loop sets both). Every kind
  // reports a loss: one that is not finite, or far above the run's starting loss, stops the run
  // as diverged before it is saved. Over several
  // processes each rank evaluates ranks.part() of the held-out data and ranks.sum() adds up the
  // counts: every rank returns the same result.
  virtual Evaluation evaluate(const Ranks& ranks) = 0;

  // What, besides the loop's own options, shapes the run: the model's options, the task or the
  // data, as JSON text under metadata keys (not "model_kind", "trainer" or "loop", which the
  // loop writes). Saved in every checkpoint; a resume requires each entry to be identical.
  virtual std::map<std::string, std::string> metadata() const = 0;

  // Activation recompute for the model's blocks (TrainerOptions::recompute): the kinds whose
  // model is made of transformer blocks turn it on there. A kind without blocks to recompute
  // refuses `on` with std::invalid_argument naming itself.
  virtual void set_recompute(bool on) {
    if (on) throw std::invalid_argument("--recompute: a " + kind_ + " model has no blocks to recompute");
  }

 private:
  std::string kind_;
  Module& model_;
  int64_t batch_rows_, vocab_;
};

}  // namespace ag
