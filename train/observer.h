// What a training run reports, as it happens: the loop (train/trainer.h) calls each observer at
// the start of run(), after every update, after every evaluation and at the end. It writes
// nothing itself: the progress line, the metrics log and the plot (train/report/observers.h) are
// observers, and a program or a user adds its own the same way:
//
//   struct BestLoss : TrainingObserver {
//     double best = INFINITY;
//     void on_evaluation(const MetricsRow& row, const Evaluation&) override { best = std::min(best, row.eval_loss); }
//   };
//   BestLoss best;
//   Trainer trainer(job, options, {.observers = {&best}});
//
// An observer outlives the run it watches; the loop never copies or owns one. An exception from
// an observer ends the run as any other error does.
#pragma once

#include <cstdint>

#include "attograd/train/job.h"
#include "attograd/train/report/metrics_log.h"

namespace ag {

struct TrainSummary;

// After an update: where the run stands.
struct StepReport {
  int64_t step = 0;          // updates done, resumed ones included
  int64_t total_steps = 0;   // the budget
  double loss = 0;           // mean training loss since the last evaluation
  double tokens_per_s = 0;   // training tokens per second of this call's training time
  double elapsed_s = 0;      // wall time, earlier sessions of a resumed run included
};

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  // Before anything else of run(): the step it starts from, and whether it goes on from a
  // checkpoint.
  virtual void on_run_start(int64_t /*step*/, bool /*resumed*/) {}
  // After each evaluation (the untrained baseline of a fresh run included): its metrics row and
  // the evaluation itself (its summary and detail lines), before the checkpoint is saved.
  virtual void on_evaluation(const MetricsRow& /*row*/, const Evaluation& /*eval*/) {}
  // After each update, once its evaluation (if any) has been reported.
  virtual void on_step(const StepReport& /*report*/) {}
  // When run() returns normally.
  virtual void on_run_end(const TrainSummary& /*summary*/) {}
};

}  // namespace ag
