// The communicator of a build with MPI. MPI starts only in a process that mpirun launched (its
// environment says so); any other process is a world of one, as in a build without MPI, and
// never loads MPI's runtime. Collectives run on MPI_COMM_WORLD from the calling thread only
// (MPI_THREAD_FUNNELED); MPI's default error handler ends the whole job on a failed call.
// The C interface only: OpenMPI's deprecated C++ bindings do not compile warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "attograd/train/dist/communicator.h"

namespace ag {

namespace {

bool launched_by_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MPI_Datatype mpi_type(DType dtype) { return dtype == DType::f32 ? MPI_FLOAT : MPI_DOUBLE; }

// MPI counts elements in int.
int element_count(const Tensor& t, const char* op) {
  if (t.numel() > INT_MAX) {
    throw std::invalid_argument(std::string("Communicator::") + op + ": " + t.shape().str() + " has " +
                                std::to_string(t.numel()) + " elements, more than one MPI call takes (" +
                                std::to_string(INT_MAX) + "); split the tensor");
  }
  return static_cast<int>(t.numel());
}

}  // namespace

struct Communicator::Pending::State {
  MPI_Request request = MPI_REQUEST_NULL;
};

Communicator::Pending::Pending() = default;
Communicator::Pending::Pending(Pending&&) noexcept = default;
Communicator::Pending& Communicator::Pending::operator=(Pending&& other) noexcept {
  if (this != &other) {
    wait();
    state_ = std::move(other.state_);
  }
  return *this;
}
Communicator::Pending::~Pending() { wait(); }

void Communicator::Pending::wait() {
  if (state_ && state_->request != MPI_REQUEST_NULL) MPI_Wait(&state_->request, MPI_STATUS_IGNORE);
}

bool Communicator::Pending::test() {
  if (done()) return true;
  int flag = 0;
  MPI_Test(&state_->request, &flag, MPI_STATUS_IGNORE);  // sets the request to MPI_REQUEST_NULL when complete
  return flag != 0;
}

bool Communicator::Pending::done() const { return !state_ || state_->request == MPI_REQUEST_NULL; }

Communicator::Communicator() {
  if (!launched_by_mpirun()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    std::atexit(finalize_at_exit);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  mpi_ = true;
}

Communicator& Communicator::world() {
  static Communicator* c = new Communicator();  // never destroyed: MPI outlives static objects
  return *c;
}

bool Communicator::built_with_mpi() { return true; }

void Communicator::all_reduce_sum(Tensor& t) {
  check_tensor(t, "all_reduce_sum");
  const int n = element_count(t, "all_reduce_sum");
  if (mpi_ && size_ > 1) MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), n, mpi_type(t.dtype()), MPI_SUM, MPI_COMM_WORLD);
}

Communicator::Pending Communicator::start_all_reduce_sum(Tensor& t) {
  check_tensor(t, "start_all_reduce_sum");
  const int n = element_count(t, "start_all_reduce_sum");
  Pending p;
  if (mpi_ && size_ > 1) {
    p.state_ = std::make_unique<Pending::State>();
    MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), n, mpi_type(t.dtype()), MPI_SUM, MPI_COMM_WORLD, &p.state_->request);
  }
  return p;
}

void Communicator::broadcast(Tensor& t, int root) {
  check_tensor(t, "broadcast");
  const int n = element_count(t, "broadcast");
  if (mpi_ && size_ > 1) MPI_Bcast(t.raw_data(), n, mpi_type(t.dtype()), root, MPI_COMM_WORLD);
}

void Communicator::broadcast(std::string& s, int root) {
  if (!mpi_ || size_ == 1) return;
  unsigned long long length = s.size();
  MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD);
  s.resize(static_cast<std::size_t>(length));
  for (unsigned long long offset = 0; offset < length;) {  // in pieces an int can count
    const int n = static_cast<int>(std::min<unsigned long long>(length - offset, INT_MAX));
    MPI_Bcast(s.data() + offset, n, MPI_CHAR, root, MPI_COMM_WORLD);
    offset += static_cast<unsigned long long>(n);
  }
}

void Communicator::barrier() {
  if (mpi_ && size_ > 1) MPI_Barrier(MPI_COMM_WORLD);
}

void Communicator::abort(const std::string& message, int code) {
  std::fprintf(stderr, "%s\n", abort_line(message).c_str());
  std::fflush(stderr);
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace ag
