// What the step benchmarks (gpt_step, llama_step) share: the median of a run's times, the peak
// resident memory, and the random token batches both time.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/core/rng.h"

namespace ag::bench {

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Step `step`'s batch: `batch` random sequences of block + 1 tokens below `vocab`, inputs the
// first block, targets the last block (next-token prediction). A pure function of (seed, step),
// so every run sees the same data.
inline void random_batch(int64_t batch, int64_t block, int64_t vocab, uint64_t seed, uint64_t step, Indices& inputs,
                         Indices& targets) {
  const int64_t b = batch, t = block;
  std::vector<int64_t> in(static_cast<size_t>(b * t)), out(static_cast<size_t>(b * t));
  const uint64_t base = step * static_cast<uint64_t>(b * (t + 1));
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j <= t; ++j) {
      const uint64_t bits = Generator::bits(seed, base + static_cast<uint64_t>(i * (t + 1) + j));
      const auto token = static_cast<int64_t>(bits % static_cast<uint64_t>(vocab));
      if (j < t) in[static_cast<size_t>(i * t + j)] = token;
      if (j > 0) out[static_cast<size_t>(i * t + j - 1)] = token;
    }
  }
  inputs = Indices({b, t}, std::move(in));
  targets = Indices({b, t}, std::move(out));
}

}  // namespace ag::bench
