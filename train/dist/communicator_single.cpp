// The communicator of a build without MPI: one process, every collective leaves its data alone.
#include <cstdio>
#include <cstdlib>

#include "attograd/train/dist/communicator.h"

namespace ag {

struct Communicator::Pending::State {};

Communicator::Pending::Pending() = default;
Communicator::Pending::Pending(Pending&&) noexcept = default;
Communicator::Pending& Communicator::Pending::operator=(Pending&&) noexcept = default;
Communicator::Pending::~Pending() = default;
void Communicator::Pending::wait() {}
bool Communicator::Pending::done() const { return true; }
bool Communicator::Pending::test() { return true; }

Communicator::Communicator() = default;

Communicator& Communicator::world() {
  static Communicator* c = new Communicator();  // never destroyed, like MPI's world
  return *c;
}

bool Communicator::built_with_mpi() { return false; }

void Communicator::all_reduce_sum(Tensor& t) { check_tensor(t, "all_reduce_sum"); }

Communicator::Pending Communicator::start_all_reduce_sum(Tensor& t) {
  check_tensor(t, "start_all_reduce_sum");
  return Pending();
}

void Communicator::broadcast(Tensor& t, int /*root*/) { check_tensor(t, "broadcast"); }
void Communicator::broadcast(std::string& /*s*/, int /*root*/) {}
void Communicator::barrier() {}
std::vector<std::string> Communicator::all_gather(const std::string& s) { return {s}; }

void Communicator::abort(const std::string& message, int code) {
  std::fprintf(stderr, "%s\n", abort_line(message).c_str());
  std::fflush(stderr);
  std::exit(code);
}

}  // namespace ag
