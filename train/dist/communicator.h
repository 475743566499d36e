// Communicator: the processes of one data-parallel run and the collective operations they take
// part in together. Under `mpirun -np N` it is MPI's world of N ranks; started any other way, or
// from a build without MPI (meson -Dmpi=disabled), it is this process alone, where every
// operation leaves its data as it is, so single-process code needs no special case.
//
//   Communicator& comm = Communicator::world();
//   comm.all_reduce_sum(grad);              // every rank now holds the sum over ranks
//   if (comm.is_root()) save_checkpoint();  // one writer
//
// MPI starts at the first call of world() in a process launched by mpirun and is finalised at
// exit. Every rank must call the collectives in the same order (MPI's rule). A rank that cannot
// go on calls abort(): it ends every rank of the job with its message, instead of leaving the
// others blocked in their next collective.
//
// No collective waits forever. A rank that has waited timeout_s() in one collective asks the
// others (by point-to-point messages, which a rank answers while it waits in a collective of its
// own) which collective they are in, gives them a second to answer, and ends the job (exit 1)
// with a message naming every rank that did not arrive: stopped (SIGSTOP, a debugger), hung, or
// far slower than the rest. The limit is kDefaultTimeoutS unless the environment variable
// ATTOGRAD_COLLECTIVE_TIMEOUT gives another number of seconds (mpirun passes the environment on
// to the ranks); it must stay well above the longest step, which a rank spends outside
// collectives while the faster ones wait.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attograd/core/tensor.h"

namespace ag {

class Communicator {
 public:
  static constexpr double kDefaultTimeoutS = 300;
  static constexpr const char* kTimeoutVariable = "ATTOGRAD_COLLECTIVE_TIMEOUT";

  // The run's communicator (one per process).
  static Communicator& world();
  // Whether this library was built with MPI (true does not mean this process runs under mpirun).
  static bool built_with_mpi();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // A sum started by start_all_reduce_sum: the tensor holds the sum once wait() has returned.
  // Destroying it unwaited waits (a collective must complete on every rank).
  class Pending {
   public:
    Pending();
    Pending(Pending&&) noexcept;
    Pending& operator=(Pending&&) noexcept;
    ~Pending();
    void wait();
    bool done() const;  // true after wait() or a test() that returned true, or when there was nothing to wait for
    // Whether the sum has arrived, without blocking. Each call also lets MPI move the sum along:
    // MPI progresses a non-blocking collective only inside MPI calls, so code that overlaps one
    // with work calls test() now and then.
    bool test();

   private:
    friend class Communicator;
    struct State;
    std::unique_ptr<State> state_;
  };

  // t (contiguous, f32 or f64, the same shape and dtype on every rank) becomes its element-wise
  // sum over all ranks, in place. std::invalid_argument naming the shape otherwise.
  void all_reduce_sum(Tensor& t);
  // The same without blocking: backward can go on while the sum travels. Do not touch t until
  // wait() has returned.
  [[nodiscard]] Pending start_all_reduce_sum(Tensor& t);

  // The root's t (same shape and dtype on every rank) into every rank's t.
  void broadcast(Tensor& t, int root = 0);
  // The root's string into every rank's s (any length; e.g. a file read once).
  void broadcast(std::string& s, int root = 0);
  void barrier();
  // Every rank's s (any length each), in rank order, on every rank.
  std::vector<std::string> all_gather(const std::string& s);

  // How long one collective may wait for the other ranks (see above), in seconds.
  double timeout_s() const { return timeout_s_; }
  // std::invalid_argument unless seconds > 0.
  void set_timeout_s(double seconds);

  // Prints "attograd: rank R of N: message" to stderr and ends every rank of the job with exit
  // status `code` (alone: this process).
  [[noreturn]] void abort(const std::string& message, int code = 1);
  // "attograd: rank R of N: message", the line abort() prints.
  std::string abort_line(const std::string& message) const;

 private:
  Communicator();
  // Shared by both builds (communicator.cpp): the checks of a collective's tensor.
  static void check_tensor(const Tensor& t, const char* op);
  // ATTOGRAD_COLLECTIVE_TIMEOUT's seconds, kDefaultTimeoutS when it is unset; abort() (exit 2)
  // when it is not a number above 0.
  double timeout_from_environment();
  // The MPI build: waits for the collective of `state` within the timeout, answering the other
  // ranks' questions meanwhile; ends the job naming the absent ranks when the time is up.
  template <typename Start>
  Pending begin(const char* op, Start start);
  void await(Pending::State& state);
  [[noreturn]] void end_for_absent_ranks(const Pending::State& state, double waited_s);
  void answer_questions();

  int rank_ = 0;
  int size_ = 1;
  bool mpi_ = false;  // MPI was started for this process
  double timeout_s_ = kDefaultTimeoutS;
  uint64_t collectives_ = 0;  // started by this rank so far: the number of the next one
};

}  // namespace ag
