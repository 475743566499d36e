// A plot of a training run as a standalone SVG file that any browser opens, against the
// optimizer step, with axes, ticks, labels and a legend: loss curves (train and held-out) in the
// upper panel; below, for a task with held-out accuracy, token and exact-sequence accuracy; for a
// language model (rows with bits per byte and no accuracy), held-out bits per byte (and the
// sliding-window figure when measured) and the learning rate. The panels follow the rows, so the
// plot shows what the run measured.
//
//   write_metrics_plot("run.svg", log.rows(), {.title = "reverse, vocab 16, length 16"});
//
// Each y axis is fitted to its values (a loss axis from 0 would flatten the part of the curve
// people look at) and turns logarithmic when they span more than a factor of 20 (a run that
// learns goes from ~ln(V) to ~1e-3, which a linear axis flattens into the floor); accuracy keeps
// 0-100%. Missing (NaN) values leave a gap in their curve.
#pragma once

#include <string>
#include <vector>

#include "attograd/train/report/metrics_log.h"

namespace ag {

struct PlotOptions {
  std::string title = "training run";
  int width = 900;   // pixels, >= 300
  int height = 700;  // pixels, >= 300
};

// The SVG document. std::invalid_argument for a size below 300 x 300. With no rows the panels
// are drawn empty with a "no data" note.
std::string metrics_plot_svg(const std::vector<MetricsRow>& rows, const PlotOptions& options = {});

// Writes metrics_plot_svg atomically; std::runtime_error naming the file on failure.
void write_metrics_plot(const std::string& path, const std::vector<MetricsRow>& rows, const PlotOptions& options = {});

}  // namespace ag
