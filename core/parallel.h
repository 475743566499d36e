// One persistent pool of worker threads for the whole library, sized by ag::set_num_threads.
//
// OpenBLAS is kept single-threaded: its own pool wakes for every product, which costs more than
// the product itself on small shapes, and two pools spinning on two cores slow each other
// down. Instead the callers that have enough work split it themselves: a large GEMM by rows or
// columns of its result, attention by (batch, head) slices. Every BLAS call therefore runs
// single-threaded, inside or outside a parallel region, and nothing oversubscribes the cores.
//
// Results never depend on which thread ran a chunk; chunk boundaries depend only on the range
// and the thread count, so the same program with the same thread count gives the same bits.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace ag {

// Work (in flops, roughly) below which splitting costs more than it saves. A worker that is
// still polling (see kSpins in parallel.cpp) joins within a microsecond, so pieces of ~0.25
// MFLOP (a few microseconds) already pay; a sleeping one takes 10-20 us to wake. Measured on
// the tiny configuration (2 threads, medians of 4 alternating runs): 4e6 -> 5e5 with the
// longer polling took a step from 1.63 to 1.40 ms, and small's from 28 to 23 ms.
inline constexpr double kParallelMinWork = 5e5;

namespace detail {
using ChunkFn = void (*)(void* context, int64_t begin, int64_t end);
void run_parallel(int64_t n, int64_t chunks, ChunkFn fn, void* context);
// Grows or shrinks the pool to `threads` threads in all (the caller counts as one).
void resize_pool(int threads);
int pool_threads();
}  // namespace detail

// How many chunks a range of n items worth `work` flops in total should be cut into: 1 when
// the work is small, inside a parallel region, or with one thread.
int64_t parallel_chunks(int64_t n, double work);

// True on a thread that is running a chunk of parallel_for.
bool in_parallel_region();

// Calls fn(begin, end) on `chunks` contiguous, nearly equal pieces of [0, n), in parallel on
// the pool (the calling thread takes one piece). The first exception thrown by a piece is
// rethrown here after every piece has finished.
template <typename Fn>
void parallel_for(int64_t n, int64_t chunks, Fn&& fn) {
  if (n <= 0) return;
  if (chunks <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  detail::run_parallel(
      n, chunks,
      [](void* context, int64_t begin, int64_t end) { (*static_cast<std::remove_reference_t<Fn>*>(context))(begin, end); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

// The half-open range of chunk i when [0, n) is cut into `chunks` nearly equal pieces.
inline std::pair<int64_t, int64_t> chunk_range(int64_t n, int64_t chunks, int64_t i) {
  const int64_t base = n / chunks, extra = n % chunks;
  const int64_t begin = i * base + (i < extra ? i : extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

}  // namespace ag
