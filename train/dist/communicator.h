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
#pragma once

#include <memory>
#include <string>

#include "attograd/core/tensor.h"

namespace ag {

class Communicator {
 public:
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

  // Prints "attograd: rank R of N: message" to stderr and ends every rank of the job with exit
  // status `code` (alone: this process).
  [[noreturn]] void abort(const std::string& message, int code = 1);

 private:
  Communicator();
  // Shared by both builds (communicator.cpp): the checks of a collective's tensor, and the line
  // abort() prints.
  static void check_tensor(const Tensor& t, const char* op);
  std::string abort_line(const std::string& message) const;

  int rank_ = 0;
  int size_ = 1;
  bool mpi_ = false;  // MPI was started for this process
};

}  // namespace ag
