// One persistent pool of worker threads for the whole library, sized by ag::set_num_threads.
//
// OpenBLAS is kept single-threaded: its own pool wakes for every product, which costs more than
// the product itself on small shapes, and two pools spinning on two cores slow each other
// down. Instead the callers that have enough work split it themselves: a large GEMM by rows or
// columns of its result, attention by (batch, head) slices. Every BLAS call therefore runs
// single-threaded, inside or outside a parallel region, and nothing oversubscribes the cores.
//
// The threads take chunks one at a time, so a thread that starts late costs nothing. When other
// programs want the cores (the pool samples the machine's runnable threads), the pool backs
// off: it uses only as many threads as there are cores left (at least one), cuts work into more
// chunks than threads (kChunksPerThread each), so that a thread preempted by another program
// holds back one small chunk, not its share, and idle threads poll only briefly before sleeping
// (parallel.cpp). Results never depend on which thread ran a chunk; chunk
// boundaries depend only on the range and the thread count, and every kernel that splits work
// keeps each output's arithmetic inside one chunk in a fixed order, so the same program gives
// the same bits with any thread count (tests/core/test_parallel.cpp).
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ag {

// Work (in flops, roughly) below which splitting costs more than it saves. A worker that is
// still polling (see kQuietPoll in parallel.cpp) joins within a microsecond, so pieces of ~0.25
// MFLOP (a few microseconds) already pay; a sleeping one takes 10-20 us to wake. Measured on
// the tiny configuration (2 threads, medians of 4 alternating runs): 4e6 -> 5e5 with the
// longer polling took a step from 1.63 to 1.40 ms, and small's from 28 to 23 ms.
inline constexpr double kParallelMinWork = 5e5;

// Chunks per thread of a big enough job on a busy machine. With 2 threads and 8 chunks a
// preempted worker holds back an eighth of the job instead of half of it. On a quiet machine a
// thread takes one chunk: fewer, larger pieces run a few per cent faster there.
inline constexpr int64_t kChunksPerThread = 4;

namespace detail {
using ChunkFn = void (*)(void* context, int64_t begin, int64_t end);
void run_parallel(int64_t n, int64_t chunks, ChunkFn fn, void* context);
// Grows or shrinks the pool to `threads` threads in all (the caller counts as one).
void resize_pool(int threads);
int pool_threads();
// Whether the pool currently treats the machine as busy: more runnable threads than usable
// cores once ours are counted (sampled from /proc/loadavg, see parallel.cpp).
bool pool_sees_busy_machine();
// The threads a job should use now (samples the machine): all of the pool's on a quiet
// machine, those that still have a core on a busy one, at least 1.
int threads_to_use();
// For tests: assume `excess` threads too many for the cores (0: a quiet machine), or measure
// again (-1, the default).
void force_excess(int excess);
// The runnable count of /proc/loadavg ("0.52 0.61 0.70 3/245 12345" -> 3), -1 when unreadable.
int runnable_threads();
int parse_runnable_threads(std::string_view loadavg);
// How many threads too many one sample shows: `runnable` threads on the machine, `awake_ours`
// of them ours, and `threads` of ours wanting `cores` cores (0 when everything fits).
int threads_in_excess(int runnable, int awake_ours, int threads, int cores);
}  // namespace detail

// How many chunks a range of n items worth `work` flops in total should be cut into: 1 when
// the work is small, inside a parallel region, or with one thread; else one per thread (up to
// kChunksPerThread per thread on a busy machine), each worth at least kParallelMinWork / 2.
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
