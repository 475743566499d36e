#include "attograd/core/threads.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "attograd/core/parallel.h"

namespace ag {

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_num_threads: need at least 1 thread, got " + std::to_string(n));
  // Far more threads than cores only costs: each is a stack and a wake-up per parallel op.
  if (n > kMaxThreads) {
    throw std::invalid_argument("set_num_threads: at most " + std::to_string(kMaxThreads) + " threads, got " +
                                std::to_string(n));
  }
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

std::string blas_kernel_note(const std::string& openblas_core, bool cpu_has_avx2_fma, bool coretype_set) {
  // OpenBLAS's x86-64 kernel sets without both AVX2 and FMA.
  static const char* const kOlder[] = {"prescott", "core2",   "penryn",  "dunnington", "nehalem", "atom",
                                       "opteron",  "opteron_sse3", "barcelona", "bobcat", "sandybridge"};
  std::string core = openblas_core;
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool older = std::find(std::begin(kOlder), std::end(kOlder), core) != std::end(kOlder);
  if (!older || !cpu_has_avx2_fma || coretype_set) return "";
  return "note   OpenBLAS chose its " + openblas_core +
         " kernels, without AVX2 and FMA, on this CPU that has both: matrix products run about twice as fast "
         "with OPENBLAS_CORETYPE=Haswell in the environment (docs/programs/common.md: Threads)\n";
}

std::string blas_kernel_note() {
  const char* core = openblas_get_corename();
  __builtin_cpu_init();
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return blas_kernel_note(core ? core : "", avx2_fma, std::getenv("OPENBLAS_CORETYPE") != nullptr);
}

}  // namespace ag
