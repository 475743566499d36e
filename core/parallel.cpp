#include "attograd/core/parallel.h"

#include <cblas.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AG_CPU_RELAX() _mm_pause()
#else
#define AG_CPU_RELAX() ((void)0)
#endif

namespace ag {

namespace {

thread_local bool t_in_region = false;

// One job at a time. A job is published as a ticket [generation:32][chunks:16][next:16]: a
// thread claims chunk `next` by a compare-and-swap on the whole ticket, so a worker that wakes
// late can never claim a chunk of a later job with the earlier job's function, and the job's
// fields are rewritten only after every claimed chunk has reported done.
class Pool {
 public:
  explicit Pool(int threads) {
    openblas_set_num_threads(1);  // see parallel.h: we split the work, BLAS runs each piece
    resize(threads);
  }

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int threads) {
    std::lock_guard<std::mutex> job(job_mutex_);
    if (threads == this->threads()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
    workers_.clear();
    stop_ = false;
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  void run(int64_t n, int64_t chunks, detail::ChunkFn fn, void* context) {
    if (t_in_region) {  // nested: this thread may already hold job_mutex_
      run_inline(n, chunks, fn, context);
      return;
    }
    std::unique_lock<std::mutex> job(job_mutex_, std::try_to_lock);
    if (!job.owns_lock() || workers_.empty()) {  // another thread's job is running: do ours alone
      run_inline(n, chunks, fn, context);
      return;
    }
    fn_ = fn;
    context_ = context;
    n_ = n;
    chunks_ = chunks;
    done_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    const uint64_t generation = (ticket_.load(std::memory_order_relaxed) >> 32) + 1;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ticket_.store((generation << 32) | (static_cast<uint64_t>(chunks) << 16), std::memory_order_release);
    }
    wake_.notify_all();
    work(static_cast<uint32_t>(generation));
    for (int spin = 0; spin < kSpins && done_.load(std::memory_order_acquire) < chunks; ++spin) AG_CPU_RELAX();
    if (done_.load(std::memory_order_acquire) < chunks) {
      std::unique_lock<std::mutex> lock(mutex_);
      finished_.wait(lock, [&] { return done_.load(std::memory_order_acquire) >= chunks; });
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // About 1 ms of polling (a pause is ~25 ns here) before sleeping: within a training step
  // the next parallel region nearly always starts sooner, and a sleeping worker takes 10-20 us
  // to wake, more than the small products it would share. Idle programs still go to sleep
  // after a millisecond; with one thread there is no worker at all.
  static constexpr int kSpins = 40000;

  static void run_inline(int64_t n, int64_t chunks, detail::ChunkFn fn, void* context) {
    const bool saved = t_in_region;
    t_in_region = true;
    try {
      for (int64_t i = 0; i < chunks; ++i) {
        const auto [begin, end] = chunk_range(n, chunks, i);
        fn(context, begin, end);
      }
    } catch (...) {
      t_in_region = saved;
      throw;
    }
    t_in_region = saved;
  }

  static uint32_t generation_of(uint64_t ticket) { return static_cast<uint32_t>(ticket >> 32); }

  // Claims and runs chunks of job `generation` until none is left.
  void work(uint32_t generation) {
    t_in_region = true;
    uint64_t t = ticket_.load(std::memory_order_acquire);
    while (generation_of(t) == generation && (t & 0xffff) < ((t >> 16) & 0xffff)) {
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      const int64_t index = static_cast<int64_t>(t & 0xffff);
      const auto chunks = static_cast<int64_t>((t >> 16) & 0xffff);
      const auto [begin, end] = chunk_range(n_, chunks, index);
      try {
        fn_(context_, begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mutex_);
        finished_.notify_all();
      }
      t = ticket_.load(std::memory_order_acquire);
    }
    t_in_region = false;
  }

  void worker_loop() {
    uint32_t seen = generation_of(ticket_.load(std::memory_order_acquire));
    while (true) {
      for (int spin = 0; spin < kSpins && generation_of(ticket_.load(std::memory_order_acquire)) == seen; ++spin) {
        AG_CPU_RELAX();
      }
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_of(ticket_.load(std::memory_order_acquire)) != seen; });
        if (stop_) return;
      }
      seen = generation_of(ticket_.load(std::memory_order_acquire));
      work(seen);
    }
  }

  std::mutex job_mutex_;  // one job at a time; also held while resizing
  std::mutex mutex_;      // guards sleeping, waking, stop_ and error_
  std::condition_variable wake_, finished_;
  std::vector<std::thread> workers_;
  bool stop_ = false;
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> done_{0};
  detail::ChunkFn fn_ = nullptr;
  void* context_ = nullptr;
  int64_t n_ = 0, chunks_ = 0;
  std::exception_ptr error_;
};

int default_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Never destroyed: joining threads during static destruction races with other statics.
Pool& pool() {
  static Pool* p = new Pool(default_threads());
  return *p;
}

}  // namespace

namespace detail {

void run_parallel(int64_t n, int64_t chunks, ChunkFn fn, void* context) { pool().run(n, chunks, fn, context); }

void resize_pool(int threads) { pool().resize(threads); }

int pool_threads() { return pool().threads(); }

}  // namespace detail

bool in_parallel_region() { return t_in_region; }

int64_t parallel_chunks(int64_t n, double work) {
  if (t_in_region || work < kParallelMinWork || n < 2) return 1;
  const int64_t threads = detail::pool_threads();
  int64_t chunks = threads < n ? threads : n;
  // Each chunk should still carry about kParallelMinWork / 2 of work.
  const auto by_work = static_cast<int64_t>(work / (kParallelMinWork / 2));
  if (by_work < chunks) chunks = by_work;
  return chunks < 1 ? 1 : (chunks > 0xffff ? 0xffff : chunks);
}

}  // namespace ag
