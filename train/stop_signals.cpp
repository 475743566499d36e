#include "attograd/train/stop_signals.h"

#include <atomic>
#include <stdexcept>

namespace ag {

namespace {

// What the handlers stop: one trainer, or one request that some other work polls. A handler
// reads them, so they are lock-free atomics.
std::atomic<Trainer*> g_trainer{nullptr};
std::atomic<std::atomic<int>*> g_request{nullptr};
std::atomic<bool> g_alive{false};
static_assert(std::atomic<Trainer*>::is_always_lock_free && std::atomic<std::atomic<int>*>::is_always_lock_free);

extern "C" void on_stop_signal(int signal) {
  std::signal(signal, SIG_DFL);  // the same signal again: the default, which ends the process
  if (Trainer* t = g_trainer.load()) t->request_stop(signal);
  if (std::atomic<int>* r = g_request.load()) r->store(signal);
}

}  // namespace

StopOnSignals::StopOnSignals(Trainer& trainer) {
  install();
  g_trainer.store(&trainer);
}

StopOnSignals::StopOnSignals(std::atomic<int>& request) {
  install();
  g_request.store(&request);
}

void StopOnSignals::install() {
  if (g_alive.exchange(true)) {
    throw std::logic_error("StopOnSignals: another one is alive (one at a time answers the signals)");
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a read or write interrupted by the signal goes on
  for (int i = 0; i < 3; ++i) {
    // A signal ignored when the process started stays ignored: nohup's SIGHUP, a script's SIGINT
    // to its background jobs. Only the others stop the work.
    sigaction(kSignals[i], nullptr, &previous_[i]);
    if (previous_[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &action, nullptr);
  }
}

StopOnSignals::~StopOnSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  g_trainer.store(nullptr);
  g_request.store(nullptr);
  g_alive.store(false);
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
