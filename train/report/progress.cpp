#include "attograd/train/report/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ag {

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return fmt("%.1fs", seconds);
  const auto whole = static_cast<long long>(seconds);
  char buf[64];
  if (whole < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", whole / 60, whole % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", whole / 3600, (whole % 3600) / 60);
  }
  return buf;
}

std::string format_rate(double per_second) {
  if (!std::isfinite(per_second) || per_second < 0) return "?";
  if (per_second < 1e3) return fmt("%.0f", per_second);
  if (per_second < 1e6) return fmt("%.1fk", per_second / 1e3);
  return fmt("%.2fM", per_second / 1e6);
}

std::string format_progress_line(const ProgressInfo& info) {
  const std::string total = std::to_string(info.total_steps);
  std::string step = std::to_string(info.step);
  if (step.size() < total.size()) step.insert(0, total.size() - step.size(), ' ');
  std::string line = "step " + step + "/" + total;
  if (info.total_steps > 0) {
    line += fmt(" %3.0f%%", 100.0 * static_cast<double>(info.step) / static_cast<double>(info.total_steps));
  }
  if (!std::isnan(info.loss)) line += " | loss " + fmt("%.4f", info.loss);
  if (!std::isnan(info.val_loss)) line += " | val " + fmt("%.4f", info.val_loss);
  if (!std::isnan(info.val_bits_per_byte)) {
    line += fmt(std::isnan(info.val_loss) ? " | val %.4f bpb" : " = %.4f bpb", info.val_bits_per_byte);
  }
  const bool tok = !std::isnan(info.token_acc), seq = !std::isnan(info.seq_acc);
  if (tok || seq) {
    line += " | acc";
    if (tok) line += " tok " + fmt("%.1f%%", 100 * info.token_acc);
    if (seq) line += " seq " + fmt("%.1f%%", 100 * info.seq_acc);
  }
  if (!std::isnan(info.tokens_per_s)) line += " | " + format_rate(info.tokens_per_s) + " tok/s";
  line += " | " + format_duration(info.elapsed_s);
  if (info.step >= info.total_steps) {
    line += " | done";
  } else if (info.step > 0) {
    const double eta = info.elapsed_s / static_cast<double>(info.step) * static_cast<double>(info.total_steps - info.step);
    line += " | ETA " + format_duration(eta);
  }
  return line;
}

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

ProgressDisplay::ProgressDisplay(std::ostream& out, bool interactive, int64_t plain_every, double redraw_interval_s)
    : out_(out), interactive_(interactive), plain_every_(plain_every), redraw_interval_s_(redraw_interval_s) {
  if (plain_every < 1) throw std::invalid_argument("ProgressDisplay: plain_every must be >= 1, got " + std::to_string(plain_every));
  if (!(redraw_interval_s >= 0)) {
    throw std::invalid_argument("ProgressDisplay: redraw_interval_s must be >= 0, got " + std::to_string(redraw_interval_s));
  }
}

ProgressDisplay::~ProgressDisplay() {
  try {
    finish();
  } catch (...) {  // a destructor must not throw; losing a final newline is harmless
  }
}

void ProgressDisplay::clear_line() {
  if (!drawn_) return;
  out_ << '\r' << std::string(last_width_, ' ') << '\r';
  drawn_ = false;
  last_width_ = 0;
}

void ProgressDisplay::update(const ProgressInfo& info) {
  const bool last = info.step >= info.total_steps;
  if (!interactive_) {
    if (info.step % plain_every_ == 0 || last) out_ << format_progress_line(info) << '\n' << std::flush;
    return;
  }
  if (drawn_ && !last && info.elapsed_s - last_draw_s_ < redraw_interval_s_) return;
  const std::string line = format_progress_line(info);
  out_ << '\r' << line;
  // Blank out what is left of a longer previous line.
  if (line.size() < last_width_) out_ << std::string(last_width_ - line.size(), ' ');
  out_ << std::flush;
  last_width_ = line.size();
  last_draw_s_ = info.elapsed_s;
  drawn_ = true;
}

void ProgressDisplay::message(const std::string& line) {
  if (interactive_) {
    clear_line();
    last_draw_s_ = -1e300;  // redraw on the next update
  }
  out_ << line << '\n' << std::flush;
}

void ProgressDisplay::finish() {
  if (interactive_ && drawn_) {
    out_ << '\n' << std::flush;
    drawn_ = false;
    last_width_ = 0;
  }
}

}  // namespace ag
