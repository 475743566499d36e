// The wall time of a training run over all its sessions: the seconds of the sessions before
// this one (restored from a checkpoint) plus the current run() so far. Both trainers keep one.
#pragma once

#include <chrono>

namespace ag {

class RunClock {
 public:
  using Clock = std::chrono::steady_clock;

  // Ends the session that start() began: its seconds join the earlier ones, also when run()
  // leaves by an exception.
  class Session {
   public:
    explicit Session(RunClock& clock) : clock_(clock) {}
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    ~Session() {
      clock_.earlier_s_ = clock_.total_s();
      clock_.running_ = false;
    }

   private:
    RunClock& clock_;
  };

  [[nodiscard]] Session start() {
    start_ = Clock::now();
    running_ = true;
    return Session(*this);
  }

  // The seconds of earlier sessions, as a resumed checkpoint recorded them.
  void set_earlier_s(double seconds) { earlier_s_ = seconds; }
  // Every session's seconds, the running one's so far included.
  double total_s() const { return earlier_s_ + (running_ ? session_s() : 0.0); }
  // Seconds since the current (or the last) session started.
  double session_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  double earlier_s_ = 0;
  bool running_ = false;
  Clock::time_point start_ = Clock::now();
};

}  // namespace ag
