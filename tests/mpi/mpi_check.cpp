// Communicator across real ranks, run by tests/mpi/run_mpi_checks.sh under `mpirun -np 2`:
//   mpi_check                 every collective, on every rank; exit 0 when all hold
//   mpi_check --fail-rank R   rank R calls abort() while the others wait in a barrier: the job
//                             must end with R's message and a non-zero status, not hang
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/core/tensor.h"
#include "attograd/train/dist/communicator.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", ag::Communicator::world().rank(), what.c_str());
    ++failures;
  }
}

// A tensor of n values rank * 1000 + i (whole numbers, so every sum is exact in f32 too).
ag::Tensor ranked(ag::DType dtype, int64_t n, int rank) {
  ag::Tensor t({n}, dtype);
  for (int64_t i = 0; i < n; ++i) t.set({i}, static_cast<double>(rank * 1000 + i));
  return t;
}

void check_sums(ag::Communicator& comm) {
  const int size = comm.size();
  for (const ag::DType dtype : {ag::DType::f32, ag::DType::f64}) {
    ag::Tensor t = ranked(dtype, 257, comm.rank());
    comm.all_reduce_sum(t);
    bool same = true;
    for (int64_t i = 0; i < 257; ++i) same = same && t.at({i}) == 1000.0 * size * (size - 1) / 2 + size * i;
    expect(same, std::string("all_reduce_sum ") + ag::dtype_name(dtype));
  }
  // Two sums in flight at once, finished in the other order.
  ag::Tensor a = ranked(ag::DType::f32, 1 << 16, comm.rank());
  ag::Tensor b = ranked(ag::DType::f64, 3, comm.rank());
  ag::Communicator::Pending pa = comm.start_all_reduce_sum(a);
  ag::Communicator::Pending pb = comm.start_all_reduce_sum(b);
  pb.wait();
  pa.wait();
  expect(pa.done() && pb.done(), "start_all_reduce_sum: done() after wait()");
  expect(a.at({5}) == 1000.0 * size * (size - 1) / 2 + size * 5.0, "start_all_reduce_sum f32");
  expect(b.at({2}) == 1000.0 * size * (size - 1) / 2 + size * 2.0, "start_all_reduce_sum f64");
}

void check_broadcasts(ag::Communicator& comm) {
  const int root = comm.size() - 1;  // not only rank 0 can be the root
  ag::Tensor t = ranked(ag::DType::f64, 10, comm.rank());
  comm.broadcast(t, root);
  expect(t.at({7}) == root * 1000.0 + 7, "broadcast of a tensor from the last rank");
  std::string s = comm.is_root() ? std::string(3 << 20, 'x') + "end" : std::string("short");
  comm.broadcast(s);
  expect(s.size() == (3u << 20) + 3 && s.substr(s.size() - 3) == "end", "broadcast of a 3 MB string");
}

void check_errors(ag::Communicator& comm) {
  ag::Tensor m({4, 3}, ag::DType::f32);
  ag::Tensor strided = m.t();
  try {
    comm.all_reduce_sum(strided);
    expect(false, "a non-contiguous tensor is refused");
  } catch (const std::invalid_argument& e) {
    expect(std::strstr(e.what(), "contiguous") != nullptr, std::string("the message names the problem: ") + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  ag::Communicator& comm = ag::Communicator::world();
  if (argc == 3 && std::strcmp(argv[1], "--fail-rank") == 0) {
    const int failing = std::atoi(argv[2]);
    if (comm.rank() == failing) comm.abort("rank " + std::to_string(failing) + " stops on purpose", 3);
    comm.barrier();  // the others wait here for a rank that never comes
    std::fprintf(stderr, "rank %d: the barrier returned, but rank %d had aborted\n", comm.rank(), failing);
    return 1;
  }
  expect(ag::Communicator::built_with_mpi(), "built with MPI");
  expect(comm.size() >= 2, "mpirun started at least 2 ranks, got " + std::to_string(comm.size()));
  check_sums(comm);
  check_broadcasts(comm);
  check_errors(comm);
  comm.barrier();
  std::printf("rank %d of %d: %s\n", comm.rank(), comm.size(), failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
