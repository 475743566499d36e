#include "attograd/train/report/observers.h"

#include "attograd/train/report/plot.h"
#include "attograd/train/trainer.h"

namespace ag {

ProgressObserver::ProgressObserver(std::ostream& out, bool interactive, int64_t plain_every)
    : display_(out, interactive, plain_every), interactive_(interactive) {}

void ProgressObserver::on_evaluation(const MetricsRow& row, const Evaluation& eval) {
  info_.val_loss = row.eval_loss;
  info_.val_bits_per_byte = row.eval_bits_per_byte;
  info_.token_acc = row.token_acc;
  info_.seq_acc = row.seq_acc;
  // A redrawn progress line is overwritten: the evaluation gets a line of its own there.
  if (interactive_) display_.message("step " + std::to_string(row.step) + ": " + eval.summary);
  for (const std::string& line : eval.details) display_.message(line);
}

void ProgressObserver::on_step(const StepReport& report) {
  info_.step = report.step;
  info_.total_steps = report.total_steps;
  info_.loss = report.loss;
  info_.tokens_per_s = report.tokens_per_s;
  info_.elapsed_s = report.elapsed_s;
  display_.update(info_);
}

void ProgressObserver::on_run_end(const TrainSummary&) { display_.finish(); }

void MetricsLogObserver::on_run_start(int64_t step, bool resumed) { log_ = open_metrics_log(path_, resumed, step); }

void MetricsLogObserver::on_evaluation(const MetricsRow& row, const Evaluation&) {
  if (log_) log_->append(row);
}

const std::vector<MetricsRow>& MetricsLogObserver::rows() const {
  static const std::vector<MetricsRow> none;
  return log_ ? log_->rows() : none;
}

void PlotObserver::on_evaluation(const MetricsRow&, const Evaluation&) {
  write_metrics_plot(path_, log_.rows(), {.title = title_});
}

}  // namespace ag
