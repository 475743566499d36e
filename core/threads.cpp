#include "attograd/core/threads.h"

#include <cblas.h>
#include <sched.h>

#include <charconv>
#include <stdexcept>
#include <string>
#include <thread>

#include "attograd/core/parallel.h"

namespace ag {

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_num_threads: need at least 1 thread, got " + std::to_string(n));
  openblas_set_num_threads(1);
  detail::resize_pool(n);
}

int num_threads() { return detail::pool_threads(); }

int usable_cores() {
  const unsigned hw = std::thread::hardware_concurrency();
  int cores = hw == 0 ? 1 : static_cast<int>(hw);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    const int allowed = CPU_COUNT(&mask);
    if (allowed > 0 && allowed < cores) cores = allowed;
  }
  return cores < 1 ? 1 : cores;
}

int parse_threads(const std::string& text, int max) {
  if (text == "auto") return usable_cores() < max ? usable_cores() : max;
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || value < 1 || value > max) {
    throw std::invalid_argument("threads: expected 'auto' or a whole number in [1, " + std::to_string(max) +
                                "], got '" + text + "'");
  }
  return value;
}

}  // namespace ag
