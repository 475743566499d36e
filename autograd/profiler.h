// A per-op profile of whole training steps, to choose the next optimisation from data.
//
//   Profiler profiler;
//   { ProfileScope scope(profiler); ... forward, backward, optimizer step ... }
//   std::cout << profiler.table();
//
// How time is attributed, without a timer inside every op: ops run one after another, so the
// time from the end of the previous op to the end of this one (make_result marks it) is this
// op's forward; each node's backward is timed by the engine as "<op> backward"; code outside
// ops can name its own region with Profiler::Region (the optimizer step, say). Only the thread
// that entered the scope is profiled. With no scope active the cost is one thread-local load.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace ag {

class Profiler {
 public:
  struct Entry {
    int64_t calls = 0;
    double ms = 0;
  };

  void add(const std::string& name, double ms);
  const std::map<std::string, Entry>& entries() const { return entries_; }
  double total_ms() const;
  void clear() { entries_.clear(); }
  // "op  calls  total ms  share" rows, largest first.
  std::string table(int64_t steps = 1) const;

  // Times a named stretch of code (and restarts the forward clock after it).
  class Region {
   public:
    explicit Region(const char* name);
    ~Region();
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;

   private:
    const char* name_;
    std::chrono::steady_clock::time_point start_;
  };

 private:
  std::map<std::string, Entry> entries_;
};

// Makes `profiler` the active profiler of this thread for the scope's lifetime.
class ProfileScope {
 public:
  explicit ProfileScope(Profiler& profiler);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler* saved_;
};

namespace profiling {
// Called by make_result after an op's forward: charges the time since the last mark to `op`.
void mark_forward(const char* op);
// The active profiler of this thread, or nullptr.
Profiler* active();
// Restarts the forward clock (after a region of other work).
void restart_clock();
}  // namespace profiling

}  // namespace ag
