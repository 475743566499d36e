// The progress line of a training run:
//
//   step   420/2000  21% | loss 0.8123 | acc tok 71.3% seq 12.5% | 48.2k tok/s | 4.1s | ETA 15.4s
//   step 100/300  33% | loss 2.6787 | val 2.6471 = 3.8190 bpb | 6.6k tok/s | 1m02s | ETA 2m04s
//
// A language model's validation loss is shown in nats per token and, after "=", in bits per
// byte of text.
//
// On a terminal the line is redrawn in place with '\r' (at most every redraw_interval_s of
// run time, and always on the last step); otherwise (a log file, CI) a plain line is printed
// every `plain_every` steps and on the last one, so logs stay readable. The display never reads
// a clock: the caller passes the elapsed time, which keeps it deterministic and testable.
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

namespace ag {

struct ProgressInfo {
  static constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();
  int64_t step = 0;         // updates done
  int64_t total_steps = 0;  // the step budget
  double loss = kMissing;   // recent training loss
  double val_loss = kMissing;  // the latest validation loss (language models)
  double val_bits_per_byte = kMissing;  // and the same in bits per byte of text
  double token_acc = kMissing;  // latest held-out accuracies, in [0, 1]
  double seq_acc = kMissing;
  double tokens_per_s = kMissing;
  double elapsed_s = 0;
};

// The line without any control characters. Missing (NaN) values are left out; the ETA assumes
// the remaining steps run at the average speed so far.
std::string format_progress_line(const ProgressInfo& info);
// "0.8s", "42.0s", "3m07s", "2h05m".
std::string format_duration(double seconds);
// "512", "48.2k", "1.35M".
std::string format_rate(double per_second);

// Whether standard output is a terminal (then the trainer redraws in place).
bool stdout_is_terminal();

class ProgressDisplay {
 public:
  // plain_every >= 1; redraw_interval_s >= 0.
  ProgressDisplay(std::ostream& out, bool interactive, int64_t plain_every = 100, double redraw_interval_s = 0.1);
  ~ProgressDisplay();
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  void update(const ProgressInfo& info);
  // Prints a line of its own (an evaluation summary, a warning) without garbling the redrawn
  // progress line: the line is cleared first and redrawn on the next update.
  void message(const std::string& line);
  // Ends the in-place line with a newline (interactive mode); safe to call more than once.
  void finish();

 private:
  void clear_line();

  std::ostream& out_;
  bool interactive_;
  int64_t plain_every_;
  double redraw_interval_s_;
  bool drawn_ = false;           // an in-place line is on screen
  double last_draw_s_ = -1e300;  // run time of the last redraw
  size_t last_width_ = 0;        // characters of the last in-place line
};

}  // namespace ag
