// The thread count, set in one place. attograd's own pool (core/parallel.h) is the only pool
// that runs work in parallel; OpenBLAS is kept single-threaded so that the two never spin on
// the same cores.
//
//   set_num_threads(parse_threads("auto"));   // every core this process may run on
//   set_num_threads(parse_threads("2"));
#pragma once

#include <string>

namespace ag {

// Sets the number of threads attograd uses (the calling thread included), 1 <= n <= kMaxThreads.
inline constexpr int kMaxThreads = 1024;
void set_num_threads(int n);
int num_threads();

// The cores this process may run on: the CPUs of its affinity mask (a container's or
// mpirun's binding), never more than the machine has; at least 1. The pool starts with this
// many threads. Work too small to split runs on one thread whatever the count
// (parallel_chunks), so "auto" costs nothing on tiny models.
int usable_cores();

// A thread count as a user writes it: "auto" (usable_cores()) or an integer in [1, max]. The
// std::invalid_argument names the text and the range.
int parse_threads(const std::string& text, int max = 256);

// OpenBLAS picks its kernels when it loads, from the CPU it recognises; on a CPU it does not
// recognise (some virtual machines' "Intel Xeon Processor") it falls back to kernels without
// AVX2 and FMA, and large matrix products run about half as fast. blas_kernel_note() says so in
// one line, naming the kernels and OPENBLAS_CORETYPE=Haswell (which a user sets to choose them),
// when that is the case here: OpenBLAS chose kernels of an older CPU, this CPU has AVX2 and FMA,
// and OPENBLAS_CORETYPE is not set. Empty otherwise. The rule itself, for tests:
std::string blas_kernel_note(const std::string& openblas_core, bool cpu_has_avx2_fma, bool coretype_set);
std::string blas_kernel_note();

}  // namespace ag
