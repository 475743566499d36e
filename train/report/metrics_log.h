// The metrics log: one JSON object per line, one line per evaluation, flushed as it is written
// so that `tail -f` and a crashed run both show every evaluation so far.
//
//   {"step":200,"train_loss":0.912,"eval_loss":0.874,"eval_bits_per_byte":null,"token_acc":0.71,
//    "seq_acc":0.05,"lr":0.003,"grad_norm":1.9,"tokens_per_s":51234.5,"elapsed_s":3.1}
//
// A value not measured at that row is NaN in MetricsRow and null in the file (JSON has no NaN;
// a diverged loss shows up as null too); the sliding-window fields are left out instead. Any JSON-lines reader loads the file, e.g.
// pandas.read_json(path, lines=True).
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ag {

struct MetricsRow {
  static constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();
  int64_t step = 0;               // optimizer updates done
  double train_loss = kMissing;   // mean training loss since the previous row
  double eval_loss = kMissing;    // held-out cross-entropy per token
  double eval_bits_per_byte = kMissing;  // the same in bits per byte of text (language models)
  double token_acc = kMissing;    // held-out, in [0, 1]
  double seq_acc = kMissing;      // held-out exact-sequence accuracy, in [0, 1]
  double lr = kMissing;
  double grad_norm = kMissing;    // before clipping
  double tokens_per_s = kMissing;
  double elapsed_s = kMissing;    // wall time since the run started (resumes included)
  // The sliding-window perplexity of the validation text (train/text_score.h), when the run asks
  // for it; unlike the fields above, written only when measured.
  double sliding_nats_per_token = kMissing;
  double sliding_perplexity = kMissing;
  double sliding_bits_per_byte = kMissing;
};

// One row as a single line of JSON (no newline).
std::string metrics_row_json(const MetricsRow& row);
// Parses one line; std::invalid_argument saying what is wrong.
MetricsRow parse_metrics_row(const std::string& line);

// Every row of a log file; std::runtime_error naming the file and the line number on a bad line
// or when the file cannot be read.
std::vector<MetricsRow> read_metrics_log(const std::string& path);

class MetricsLog {
 public:
  // Starts a new log, replacing any file at `path`.
  explicit MetricsLog(const std::string& path);
  // Continues the log of a resumed run: keeps the rows with step <= resume_step, drops the later
  // ones (the interrupted run wrote them after its last checkpoint, and they are about to be
  // written again), and appends after them. A missing file starts a new log.
  static MetricsLog resume(const std::string& path, int64_t resume_step);

  // Writes one line and flushes it; std::runtime_error naming the file if that fails.
  void append(const MetricsRow& row);
  // Every row in the file, the kept ones of a resumed log included (what a plot shows).
  const std::vector<MetricsRow>& rows() const { return rows_; }
  const std::string& path() const { return path_; }

 private:
  MetricsLog(std::string path, std::vector<MetricsRow> kept);
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::vector<MetricsRow> rows_;
};

// The log of a run: none when `path` is empty, MetricsLog::resume(path, step) when the run was
// resumed, else a new one.
std::optional<MetricsLog> open_metrics_log(const std::string& path, bool resumed, int64_t step);

}  // namespace ag
