// Grad mode and anomaly mode, both per thread.
//
// NoGradGuard: inside its scope ops record no graph (evaluation, optimizer updates).
// AnomalyGuard: inside its scope backward checks every gradient it computes for NaN or Inf and
// throws std::runtime_error naming the op that produced it.
#pragma once

namespace ag {

bool grad_enabled();
void set_grad_enabled(bool enabled);

// GradModeGuard: grad mode set to `enabled` inside its scope (recompute turns it on for the
// second run of a region, whatever the caller of backward had).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : saved_(grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(saved_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool saved_;
};

class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

bool anomaly_enabled();
void set_anomaly_enabled(bool enabled);

class AnomalyGuard {
 public:
  AnomalyGuard() : saved_(anomaly_enabled()) { set_anomaly_enabled(true); }
  ~AnomalyGuard() { set_anomaly_enabled(saved_); }
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;

 private:
  bool saved_;
};

}  // namespace ag
