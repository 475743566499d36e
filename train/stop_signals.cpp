#include "attograd/train/stop_signals.h"

#include <atomic>
#include <stdexcept>

namespace ag {

namespace {

// The one trainer that the handlers stop. A handler reads it, so it is a lock-free atomic.
std::atomic<Trainer*> g_trainer{nullptr};
static_assert(std::atomic<Trainer*>::is_always_lock_free);

extern "C" void on_stop_signal(int signal) {
  std::signal(signal, SIG_DFL);  // the same signal again: the default, which ends the process
  if (Trainer* t = g_trainer.load()) t->request_stop(signal);
}

}  // namespace

StopOnSignals::StopOnSignals(Trainer& trainer) {
  Trainer* none = nullptr;
  if (!g_trainer.compare_exchange_strong(none, &trainer)) {
    throw std::logic_error("StopOnSignals: another one is alive (one trainer at a time answers the signals)");
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a read or write interrupted by the signal goes on
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &previous_[i]);
}

StopOnSignals::~StopOnSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  g_trainer.store(nullptr);
}

int interrupted_exit_status(const TrainSummary& summary) {
  return 128 + (summary.stop_signal > 0 ? summary.stop_signal : SIGINT);
}

bool is_interrupted_exit_status(int status) {
  for (const int signal : StopOnSignals::kSignals) {
    if (status == 128 + signal) return true;
  }
  return false;
}

}  // namespace ag
