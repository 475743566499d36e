#include "attograd/core/parallel.h"

#include <cblas.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "attograd/core/threads.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AG_CPU_RELAX() _mm_pause()
#else
#define AG_CPU_RELAX() ((void)0)
#endif

namespace ag {

namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_in_region = false;

// How long a thread polls before it sleeps: a worker waiting for the next job, or the thread
// that started a job waiting for its last chunk. A sleeping thread takes 10-20 us to wake, so on
// a quiet machine polling pays: within a training step the next parallel region nearly always
// starts within a millisecond (tiny configuration: 1.63 -> 1.40 ms per step against sleeping
// at once). On a busy machine a polling thread holds a core that another program, or our own
// worker that was preempted in the middle of a chunk, is waiting for; there it polls only
// about as long as a wake-up costs, then sleeps and gives the core away.
constexpr auto kQuietPoll = std::chrono::microseconds(1000);
constexpr auto kBusyPoll = std::chrono::microseconds(20);

// Polls done() until it is true (returns true) or `budget` has passed (returns done()).
template <typename Done>
bool poll(Done done, Clock::duration budget) {
  const Clock::time_point start = Clock::now();
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      AG_CPU_RELAX();
    }
    if (Clock::now() - start >= budget) return done();
  }
}

// Whether other programs want the cores, sampled from the kernel's count of runnable threads
// less our own awake ones, at most every kSampleEvery (20 ms), by whichever thread asks how to split a
// job. One sample is noisy (a kernel thread passing by; our worker woken but not yet counted
// awake), so the verdict follows a running average of how many threads too many there are, with
// some hysteresis: busy above half a thread on average, quiet again below a quarter. Busy, the
// pool uses only the threads that still have a core (at least one): with one of two cores held
// by another program it runs like one thread instead of fighting for the core.
class LoadMonitor {
 public:
  // Threads in excess of the cores: 0 on a quiet machine.
  int excess() const {
    const int forced = forced_.load(std::memory_order_relaxed);
    return forced >= 0 ? forced : excess_now_.load(std::memory_order_relaxed);
  }
  void force(int excess) { forced_.store(excess, std::memory_order_relaxed); }

  void sample(int awake_ours, int threads) {
    // The common case, not yet time: one clock read and one relaxed load, no lock.
    const int64_t now = Clock::now().time_since_epoch().count();
    if (now < next_sample_.load(std::memory_order_relaxed)) return;
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return;  // another thread is sampling
    next_sample_.store(now + std::chrono::duration_cast<Clock::duration>(kSampleEvery).count(),
                       std::memory_order_relaxed);
    const int runnable = detail::runnable_threads();
    if (runnable < 0) return;  // no /proc: stay quiet
    average_ = 0.7 * average_ + 0.3 * detail::threads_in_excess(runnable, awake_ours, threads, usable_cores());
    const bool was_busy = excess_now_.load(std::memory_order_relaxed) > 0;
    const bool busy = was_busy ? average_ > 0.25 : average_ > 0.5;
    excess_now_.store(busy ? std::max(1, static_cast<int>(average_ + 0.5)) : 0, std::memory_order_relaxed);
  }

 private:
  // Reading /proc costs a few microseconds: every 20 ms it is lost in the noise even for the
  // tiny model's 1 ms steps, and the average still follows a change within a tenth of a second.
  static constexpr auto kSampleEvery = std::chrono::milliseconds(20);
  std::mutex mutex_;
  std::atomic<int64_t> next_sample_{0};  // Clock ticks
  double average_ = 0;  // running average of threads_in_excess
  std::atomic<int> excess_now_{0};
  std::atomic<int> forced_{-1};  // tests: -1 measure, else the excess to assume
};

// One job at a time. A job is published as a ticket [generation:32][chunks:16][next:16]: a
// thread claims chunk `next` by a compare-and-swap on the whole ticket, so a worker that wakes
// late can never claim a chunk of a later job with the earlier job's function, and the job's
// fields are rewritten only after every claimed chunk has reported done. Chunks are claimed one
// at a time by whichever thread is free, so a worker that starts late, or is preempted, delays
// the job by at most the one chunk it holds.
class Pool {
 public:
  explicit Pool(int threads) {
    openblas_set_num_threads(1);  // see parallel.h: we split the work, BLAS runs each piece
    resize(threads);
  }

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  bool busy() const { return load_.excess() > 0; }
  void force_excess(int excess) { load_.force(excess); }

  // The threads a job should use now: all of them on a quiet machine, those that still have a
  // core on a busy one.
  int threads_to_use() {
    const int all = threads();
    if (all == 1) return 1;
    load_.sample(1 + awake_.load(std::memory_order_relaxed), all);
    return std::max(1, all - load_.excess());
  }

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
    awake_.store(threads - 1, std::memory_order_relaxed);
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
    const auto finished = [&] { return done_.load(std::memory_order_acquire) >= chunks; };
    if (!poll(finished, poll_budget())) {
      std::unique_lock<std::mutex> lock(mutex_);
      finished_.wait(lock, finished);
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  Clock::duration poll_budget() const { return busy() ? Clock::duration(kBusyPoll) : Clock::duration(kQuietPoll); }

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
    const auto new_job = [&] { return generation_of(ticket_.load(std::memory_order_acquire)) != seen; };
    while (true) {
      if (!poll(new_job, poll_budget())) {
        std::unique_lock<std::mutex> lock(mutex_);
        awake_.fetch_sub(1, std::memory_order_relaxed);
        wake_.wait(lock, [&] { return stop_ || new_job(); });
        awake_.fetch_add(1, std::memory_order_relaxed);
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
  std::atomic<int> awake_{0};  // workers polling or working (not asleep)
  LoadMonitor load_;
  detail::ChunkFn fn_ = nullptr;
  void* context_ = nullptr;
  int64_t n_ = 0, chunks_ = 0;
  std::exception_ptr error_;
};

// Never destroyed: joining threads during static destruction races with other statics.
Pool& pool() {
  static Pool* p = new Pool(usable_cores());
  return *p;
}

}  // namespace

namespace detail {

void run_parallel(int64_t n, int64_t chunks, ChunkFn fn, void* context) { pool().run(n, chunks, fn, context); }

void resize_pool(int threads) { pool().resize(threads); }

int pool_threads() { return pool().threads(); }

bool pool_sees_busy_machine() { return pool().busy(); }

int threads_to_use() { return pool().threads_to_use(); }

void force_excess(int excess) { pool().force_excess(excess); }

int parse_runnable_threads(std::string_view loadavg) {
  // "0.52 0.61 0.70 3/245 12345": the fourth field is runnable/total scheduling entities.
  size_t field = 0, i = 0;
  while (i < loadavg.size() && field < 3) {
    if (loadavg[i] == ' ') {
      ++field;
      while (i < loadavg.size() && loadavg[i] == ' ') ++i;
    } else {
      ++i;
    }
  }
  const size_t slash = loadavg.find('/', i);
  if (field != 3 || slash == std::string_view::npos) return -1;
  int value = -1;
  const auto [end, error] = std::from_chars(loadavg.data() + i, loadavg.data() + slash, value);
  return error == std::errc() && end == loadavg.data() + slash ? value : -1;
}

int runnable_threads() {
  // Kept open: each sample is one pread, not an open, a read and a close.
  static const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t got = ::pread(fd, text, sizeof text - 1, 0);
  if (got <= 0) return -1;
  return parse_runnable_threads(std::string_view(text, static_cast<size_t>(got)));
}

int threads_in_excess(int runnable, int awake_ours, int threads, int cores) {
  const int others = runnable > awake_ours ? runnable - awake_ours : 0;
  return others + threads > cores ? others + threads - cores : 0;
}

}  // namespace detail

bool in_parallel_region() { return t_in_region; }

int64_t parallel_chunks(int64_t n, double work) {
  if (t_in_region || work < kParallelMinWork || n < 2) return 1;
  const int64_t threads = detail::threads_to_use();
  if (threads == 1) return 1;
  // Quiet: one chunk a thread, the fewest and largest pieces. Busy: kChunksPerThread each, so
  // that a preempted thread holds back one small piece. The bits are the same either way.
  const int64_t wanted = detail::pool_sees_busy_machine() ? threads * kChunksPerThread : threads;
  int64_t chunks = wanted < n ? wanted : n;
  // Each chunk should still carry about kParallelMinWork / 2 of work.
  const auto by_work = static_cast<int64_t>(work / (kParallelMinWork / 2));
  if (by_work < chunks) chunks = by_work;
  return chunks < 1 ? 1 : (chunks > 0xffff ? 0xffff : chunks);
}

}  // namespace ag
