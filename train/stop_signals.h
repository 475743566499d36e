// StopOnSignals: every signal that asks a job to end stops a training run cleanly. While one
// lives, the first SIGINT (Ctrl-C), SIGTERM (kill, a batch system, `mpirun` passing on a Ctrl-C)
// or SIGHUP (a closed terminal) asks the trainer to stop after the current update, which it then
// saves; over several processes every rank stops after the same update (Trainer::run agrees on
// it). A second signal of the same kind ends the process at once, as it would without us.
//
//   Trainer trainer(job, options, outputs);
//   TrainSummary s;
//   { const StopOnSignals stop(trainer); s = trainer.run(); }
//   return s.interrupted ? interrupted_exit_status(s) : 0;   // 130, 143 or 129
//
// Under mpirun (OpenMPI 4) a Ctrl-C reaches mpirun, which sends each rank SIGCONT and SIGTERM,
// then SIGKILL after the MCA parameter odls_base_sigkill_timeout, 1 second by default: the update
// in flight and rank 0's save must fit in it, or the job must be started with a longer one
// (`mpirun --mca odls_base_sigkill_timeout 30 ...`). A SIGTERM sent to every rank directly (as
// batch systems do) has no such limit.
#pragma once

#include <atomic>
#include <csignal>

#include "attograd/train/trainer.h"

namespace ag {

class StopOnSignals {
 public:
  // Installs the handlers (std::logic_error if another StopOnSignals is alive); the destructor
  // puts the previous handlers back.
  explicit StopOnSignals(Trainer& trainer);
  // The same for work that is not a training run: the first signal is stored in `request`
  // (0 until then), which the work polls to end cleanly, e.g. prepare_text removing its partial
  // shards.
  explicit StopOnSignals(std::atomic<int>& request);
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

 private:
  void install();
  struct sigaction previous_[3];
};

// The exit status of a run that a stop request ended: 128 + the signal the ranks agreed on (the
// shell's convention: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), 130 for a request that
// came from no signal.
int interrupted_exit_status(const TrainSummary& summary);
// Whether an exit status is one of those.
bool is_interrupted_exit_status(int status);

}  // namespace ag
