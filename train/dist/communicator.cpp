// What both builds of Communicator share (communicator_mpi.cpp, communicator_single.cpp).
#include <stdexcept>
#include <string>

#include "attograd/train/dist/communicator.h"

namespace ag {

void Communicator::check_tensor(const Tensor& t, const char* op) {
  if (!t.defined()) throw std::invalid_argument(std::string("Communicator::") + op + ": the tensor is undefined");
  if (!t.is_contiguous()) {
    throw std::invalid_argument(std::string("Communicator::") + op + ": the tensor " + t.shape().str() +
                                " must be contiguous (call contiguous() first)");
  }
}

std::string Communicator::abort_line(const std::string& message) const {
  return "attograd: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + message;
}

}  // namespace ag
