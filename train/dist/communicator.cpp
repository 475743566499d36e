// What both builds of Communicator share (communicator_mpi.cpp, communicator_single.cpp).
#include <cmath>
#include <cstdlib>
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

void Communicator::set_timeout_s(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) {
    throw std::invalid_argument("Communicator::set_timeout_s: the limit must be a finite number of seconds above 0, got " +
                                std::to_string(seconds));
  }
  timeout_s_ = seconds;
}

double Communicator::timeout_from_environment() {
  const char* text = std::getenv(kTimeoutVariable);
  if (text == nullptr) return kDefaultTimeoutS;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds)) {
    abort(std::string(kTimeoutVariable) + ": '" + text +
              "' is not a number of seconds above 0 (how long a collective may wait for the other ranks)",
          2);
  }
  return seconds;
}

}  // namespace ag
