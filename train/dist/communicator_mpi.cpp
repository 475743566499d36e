// The communicator of a build with MPI. MPI starts only in a process that mpirun launched (its
// environment says so); any other process is a world of one, as in a build without MPI, and
// never loads MPI's runtime. Collectives run on MPI_COMM_WORLD from the calling thread only
// (MPI_THREAD_FUNNELED); MPI's default error handler ends the whole job on a failed call.
// Every collective is MPI's non-blocking one, waited for by await(): that is where the timeout
// lives, and where a waiting rank answers the others' "which collective are you in?".
// The C interface only: OpenMPI's deprecated C++ bindings do not compile warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

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

// Tags of the point-to-point questions a timed-out rank asks (collectives never match them).
constexpr int kQuestionTag = 27001;
constexpr int kAnswerTag = 27002;
// How long a timed-out rank waits for the others' answers before it names the silent ones.
constexpr double kAnswerGraceS = 1.0;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A wait loop's pause: none at first (most collectives complete within microseconds), then
// short sleeps, so that a long wait leaves the core to the rank it waits for.
void pause_after(double waited_s) {
  if (waited_s > 0.01) std::this_thread::sleep_for(std::chrono::microseconds(100));
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
  Communicator* comm = nullptr;
  const char* op = "";
  unsigned long long number = 0;  // this collective's place in the job's sequence
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
  if (state_ && state_->request != MPI_REQUEST_NULL) state_->comm->await(*state_);
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
  timeout_s_ = timeout_from_environment();
}

Communicator& Communicator::world() {
  static Communicator* c = new Communicator();  // never destroyed: MPI outlives static objects
  return *c;
}

bool Communicator::built_with_mpi() { return true; }

// A collective started by `start(request)`, numbered in this rank's sequence of collectives.
template <typename Start>
Communicator::Pending Communicator::begin(const char* op, Start start) {
  Pending p;
  p.state_ = std::make_unique<Pending::State>();
  p.state_->comm = this;
  p.state_->op = op;
  p.state_->number = ++collectives_;
  start(&p.state_->request);
  return p;
}

void Communicator::await(Pending::State& state) {
  const Clock::time_point start = Clock::now();
  for (;;) {
    int flag = 0;
    MPI_Test(&state.request, &flag, MPI_STATUS_IGNORE);
    if (flag != 0) return;
    answer_questions();
    const double waited = seconds_since(start);
    if (waited > timeout_s_) end_for_absent_ranks(state, waited);
    pause_after(waited);
  }
}

// Another rank has timed out and asks which collective this one is in: its number.
void Communicator::answer_questions() {
  for (;;) {
    int asked = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kQuestionTag, MPI_COMM_WORLD, &asked, &status);
    if (asked == 0) return;
    unsigned long long theirs = 0, ours = collectives_;
    MPI_Recv(&theirs, 1, MPI_UNSIGNED_LONG_LONG, status.MPI_SOURCE, kQuestionTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&ours, 1, MPI_UNSIGNED_LONG_LONG, status.MPI_SOURCE, kAnswerTag, MPI_COMM_WORLD);
  }
}

void Communicator::end_for_absent_ranks(const Pending::State& state, double waited_s) {
  // Ask every other rank; a rank that waits in a collective answers within milliseconds.
  const unsigned long long ours = state.number;
  std::vector<unsigned long long> answers(static_cast<size_t>(size_), 0);
  std::vector<MPI_Request> questions, replies;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request q, a;
    MPI_Isend(&ours, 1, MPI_UNSIGNED_LONG_LONG, r, kQuestionTag, MPI_COMM_WORLD, &q);
    MPI_Irecv(&answers[static_cast<size_t>(r)], 1, MPI_UNSIGNED_LONG_LONG, r, kAnswerTag, MPI_COMM_WORLD, &a);
    questions.push_back(q);
    replies.push_back(a);
  }
  const Clock::time_point asked = Clock::now();
  std::vector<int> answered(replies.size(), 0);
  for (bool all = false; !all && seconds_since(asked) < kAnswerGraceS;) {
    all = true;
    for (size_t i = 0; i < replies.size(); ++i) {
      if (answered[i] == 0) MPI_Test(&replies[i], &answered[i], MPI_STATUS_IGNORE);
      all = all && answered[i] != 0;
    }
    answer_questions();  // the others may be asking too
    pause_after(1);
  }
  std::string absent, elsewhere;
  for (int r = 0, i = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const size_t k = static_cast<size_t>(i++);
    const unsigned long long theirs = answers[static_cast<size_t>(r)];
    if (answered[k] == 0) {
      absent += (absent.empty() ? "" : ", ") + std::to_string(r);
    } else if (theirs != ours) {
      elsewhere += "; rank " + std::to_string(r) + " is at collective #" + std::to_string(theirs);
    }
  }
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f", waited_s);
  const std::string who = absent.empty() ? "" : (absent.find(',') == std::string::npos ? "rank " : "ranks ") + absent;
  abort(std::string(state.op) + " (collective #" + std::to_string(ours) + ") waited " + waited + " s for the other ranks, " +
            "the limit: " + (who.empty() ? "" : who + " did not arrive (stopped, hung or far slower than the others)") +
            elsewhere + "; the job ends (" + kTimeoutVariable + " sets the limit in seconds)",
        1);
}

void Communicator::all_reduce_sum(Tensor& t) { start_all_reduce_sum(t).wait(); }

Communicator::Pending Communicator::start_all_reduce_sum(Tensor& t) {
  check_tensor(t, "start_all_reduce_sum");
  const int n = element_count(t, "start_all_reduce_sum");
  if (!mpi_ || size_ == 1) return Pending();
  return begin("all_reduce_sum", [&](MPI_Request* r) {
    MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), n, mpi_type(t.dtype()), MPI_SUM, MPI_COMM_WORLD, r);
  });
}

void Communicator::broadcast(Tensor& t, int root) {
  check_tensor(t, "broadcast");
  const int n = element_count(t, "broadcast");
  if (!mpi_ || size_ == 1) return;
  begin("broadcast", [&](MPI_Request* r) { MPI_Ibcast(t.raw_data(), n, mpi_type(t.dtype()), root, MPI_COMM_WORLD, r); })
      .wait();
}

void Communicator::broadcast(std::string& s, int root) {
  if (!mpi_ || size_ == 1) return;
  unsigned long long length = s.size();
  begin("broadcast", [&](MPI_Request* r) { MPI_Ibcast(&length, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD, r); })
      .wait();
  s.resize(static_cast<std::size_t>(length));
  for (unsigned long long offset = 0; offset < length;) {  // in pieces an int can count
    const int n = static_cast<int>(std::min<unsigned long long>(length - offset, INT_MAX));
    begin("broadcast", [&](MPI_Request* r) { MPI_Ibcast(s.data() + offset, n, MPI_CHAR, root, MPI_COMM_WORLD, r); })
        .wait();
    offset += static_cast<unsigned long long>(n);
  }
}

void Communicator::barrier() {
  if (mpi_ && size_ > 1) begin("barrier", [&](MPI_Request* r) { MPI_Ibarrier(MPI_COMM_WORLD, r); }).wait();
}

std::vector<std::string> Communicator::all_gather(const std::string& s) {
  if (!mpi_ || size_ == 1) return {s};
  const auto ranks = static_cast<size_t>(size_);
  std::vector<unsigned long long> lengths(ranks);
  unsigned long long mine = s.size();
  begin("all_gather", [&](MPI_Request* r) {
    MPI_Iallgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, lengths.data(), 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD, r);
  }).wait();
  std::vector<int> counts(ranks), offsets(ranks);
  unsigned long long total = 0;
  for (size_t r = 0; r < ranks; ++r) {
    // Every rank sees the same lengths, so every rank refuses alike.
    if (total + lengths[r] > INT_MAX) {
      throw std::invalid_argument("Communicator::all_gather: the strings add up to more than one MPI call takes (" +
                                  std::to_string(INT_MAX) + " bytes)");
    }
    offsets[r] = static_cast<int>(total);
    counts[r] = static_cast<int>(lengths[r]);
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  begin("all_gather", [&](MPI_Request* r) {
    MPI_Iallgatherv(s.data(), static_cast<int>(mine), MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR,
                    MPI_COMM_WORLD, r);
  }).wait();
  std::vector<std::string> out;
  for (size_t r = 0; r < ranks; ++r) out.push_back(all.substr(static_cast<size_t>(offsets[r]), lengths[r]));
  return out;
}

void Communicator::abort(const std::string& message, int code) {
  std::fprintf(stderr, "%s\n", abort_line(message).c_str());
  std::fflush(stderr);
  if (mpi_) {
    // A check every rank makes fails on every rank at once. Several MPI_Abort reports arriving
    // together can crash OpenMPI 4's mpirun as it merges their notices (a segfault in
    // show_help.c, the job's exit status 139 instead of `code`): the ranks after the first wait
    // a moment, so that the lowest failing rank's abort ends the job while they wait.
    const int r = rank();
    if (r > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100 * std::min(r, 10)));
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::exit(code);
}

}  // namespace ag
