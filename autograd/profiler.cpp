#include "attograd/autograd/profiler.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace ag {

namespace {
thread_local Profiler* g_active = nullptr;
thread_local std::chrono::steady_clock::time_point g_last_mark;

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

void Profiler::add(const std::string& name, double ms) {
  Entry& e = entries_[name];
  ++e.calls;
  e.ms += ms;
}

double Profiler::total_ms() const {
  double total = 0;
  for (const auto& [name, e] : entries_) total += e.ms;
  return total;
}

std::string Profiler::table(int64_t steps) const {
  std::vector<std::pair<std::string, Entry>> rows(entries_.begin(), entries_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  const double total = total_ms();
  const double per = steps > 0 ? static_cast<double>(steps) : 1.0;
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%-32s %12s %14s %8s\n", "op", "calls/step", "ms/step", "share");
  out += line;
  for (const auto& [name, e] : rows) {
    std::snprintf(line, sizeof line, "%-32s %12.1f %14.4f %7.1f%%\n", name.c_str(), static_cast<double>(e.calls) / per,
                  e.ms / per, total > 0 ? 100.0 * e.ms / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-32s %12s %14.4f %7.1f%%\n", "total", "", total / per, 100.0);
  out += line;
  return out;
}

Profiler::Region::Region(const char* name) : name_(name), start_(std::chrono::steady_clock::now()) {}

Profiler::Region::~Region() {
  if (g_active != nullptr) g_active->add(name_, ms_since(start_));
  g_last_mark = std::chrono::steady_clock::now();
}

ProfileScope::ProfileScope(Profiler& profiler) : saved_(g_active) {
  g_active = &profiler;
  g_last_mark = std::chrono::steady_clock::now();
}

ProfileScope::~ProfileScope() { g_active = saved_; }

namespace profiling {

void mark_forward(const char* op) {
  if (g_active == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  g_active->add(op, std::chrono::duration<double, std::milli>(now - g_last_mark).count());
  g_last_mark = now;
}

Profiler* active() { return g_active; }

void restart_clock() { g_last_mark = std::chrono::steady_clock::now(); }

}  // namespace profiling

}  // namespace ag
