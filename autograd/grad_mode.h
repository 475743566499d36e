// Grad mode and anomaly mode, both per thread.
//
// NoGradGuard: inside its scope ops record no graph (evaluation, optimizer updates).
// AnomalyGuard: inside its scope backward checks every gradient it computes for NaN or Inf and
// throws std::runtime_error naming the op that produced it.
#pragma once

namespace ag {

bool grad_enabled();
void set_grad_enabled(bool enabled);

class NoGradGuard {
 public:
  NoGradGuard() : saved_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(saved_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool saved_;
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
