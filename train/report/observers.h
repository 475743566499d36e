// The observers every training program uses (train/observer.h): the progress line, the metrics
// log and the plot. The trainer builds them from TrainerOutputs' progress, log_path and
// plot_path; a program that wants another report adds an observer of its own beside them.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "attograd/train/observer.h"
#include "attograd/train/report/metrics_log.h"
#include "attograd/train/report/progress.h"

namespace ag {

// The progress line (progress.h) and, after each evaluation, its summary and detail lines.
class ProgressObserver : public TrainingObserver {
 public:
  ProgressObserver(std::ostream& out, bool interactive, int64_t plain_every);
  void on_evaluation(const MetricsRow& row, const Evaluation& eval) override;
  void on_step(const StepReport& report) override;
  void on_run_end(const TrainSummary& summary) override;

 private:
  ProgressDisplay display_;
  ProgressInfo info_;
  bool interactive_;
};

// One JSON line per evaluation (metrics_log.h): a fresh run starts the file, a resumed one goes
// on after its checkpoint's step.
class MetricsLogObserver : public TrainingObserver {
 public:
  explicit MetricsLogObserver(std::string path) : path_(std::move(path)) {}
  void on_run_start(int64_t step, bool resumed) override;
  void on_evaluation(const MetricsRow& row, const Evaluation& eval) override;
  // The rows so far, earlier sessions' included (empty before the run starts).
  const std::vector<MetricsRow>& rows() const;

 private:
  std::string path_;
  std::optional<MetricsLog> log_;
};

// The SVG plot (plot.h) of a log's rows, rewritten after each evaluation.
class PlotObserver : public TrainingObserver {
 public:
  PlotObserver(std::string path, std::string title, const MetricsLogObserver& log)
      : path_(std::move(path)), title_(std::move(title)), log_(log) {}
  void on_evaluation(const MetricsRow& row, const Evaluation& eval) override;

 private:
  std::string path_, title_;
  const MetricsLogObserver& log_;
};

}  // namespace ag
