// What this machine's cores can do for a float32 training step, measured rather than looked up:
//  1. the FMA peak: independent chains of 256-bit fused multiply-adds that never touch memory,
//     on one thread and on one thread per core at once (the ceiling no matrix library passes);
//  2. OpenBLAS's own throughput on the linear products of a GPT training step (forward, dX and
//     dW of every layer's q, k, v, output and feed-forward projections and of the head), with
//     OpenBLAS's threads, no attograd code in between: the floor for the products of a step;
//  3. the memory read bandwidth: a sum over a buffer of 1 GiB (far beyond every cache), split
//     among the threads, on one thread and on --threads (the median of seven rounds): the ceiling of cached generation at
//     batch 1, which reads every weight once per token.
// bench/RESULTS.md uses them to say how fast a whole GPT step, or a generated token, can possibly
// be here.
//
//   build/bench/machine_peak [--threads 2] [--config baby|large|gpt2-4x64|gpt2-8x256]
#include <CLI/CLI.hpp>
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>
#include "guarded_main.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Ten chains: more than an FMA's latency times the FMA units, so the units never wait. The
// empty asm keeps the accumulators in registers and stops the compiler from folding the loop.
[[gnu::target("avx2,fma")]] double fma_chains(int64_t iterations) {
  const __m256 x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
  __m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2), a3 = _mm256_set1_ps(3);
  __m256 a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5), a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7);
  __m256 a8 = _mm256_set1_ps(8), a9 = _mm256_set1_ps(9);
  for (int64_t i = 0; i < iterations; ++i) {
    a0 = _mm256_fmadd_ps(a0, x, y), a1 = _mm256_fmadd_ps(a1, x, y), a2 = _mm256_fmadd_ps(a2, x, y);
    a3 = _mm256_fmadd_ps(a3, x, y), a4 = _mm256_fmadd_ps(a4, x, y), a5 = _mm256_fmadd_ps(a5, x, y);
    a6 = _mm256_fmadd_ps(a6, x, y), a7 = _mm256_fmadd_ps(a7, x, y), a8 = _mm256_fmadd_ps(a8, x, y);
    a9 = _mm256_fmadd_ps(a9, x, y);
    asm volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8),
                 "+x"(a9));
  }
  const __m256 sum = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) + (a8 + a9);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  return static_cast<double>(lanes[0]);  // returned so the chains count as used
}

// GFLOP/s of `threads` threads running the chains at once (best of three).
double fma_peak(int threads) {
  constexpr int64_t kIterations = 100'000'000;
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> pool;
    const Clock::time_point t0 = Clock::now();
    for (int t = 0; t < threads; ++t) pool.emplace_back([] { fma_chains(kIterations); });
    for (std::thread& t : pool) t.join();
    best = std::min(best, seconds_since(t0));
  }
  return threads * static_cast<double>(kIterations) * 10 * 8 * 2 / best / 1e9;
}

// Sums floats [begin, end) with four independent 256-bit accumulators (so that the adds never
// wait on each other and the loads are the limit).
[[gnu::target("avx2")]] float sum_range(const float* p, int64_t begin, int64_t end) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = begin;
  for (; i + 32 <= end; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float total = 0;
  for (float v : lanes) total += v;
  for (; i < end; ++i) total += p[i];
  return total;
}

// GB/s of `threads` threads each summing its share of a 1 GiB buffer (the median of seven: on a
// shared host one round now and then runs far faster than the rest); the buffer is written first,
// so that its pages exist before the clock starts.
double read_bandwidth(int threads) {
  constexpr int64_t kFloats = int64_t{1} << 28;  // 1 GiB
  static std::vector<float> buffer(static_cast<size_t>(kFloats), 1.0f);
  std::vector<double> times;
  std::vector<float> partial(static_cast<size_t>(threads));
  for (int round = 0; round < 7; ++round) {
    std::vector<std::thread> pool;
    const Clock::time_point t0 = Clock::now();
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        partial[static_cast<size_t>(t)] = sum_range(buffer.data(), kFloats * t / threads, kFloats * (t + 1) / threads);
      });
    }
    for (std::thread& t : pool) t.join();
    times.push_back(seconds_since(t0));
    float total = 0;
    for (float v : partial) total += v;
    if (total <= 0) std::printf("(the sum came out %g)\n", static_cast<double>(total));  // keeps it used
  }
  std::sort(times.begin(), times.end());
  return static_cast<double>(kFloats) * sizeof(float) / times[times.size() / 2] / 1e9;
}

struct Config {
  int64_t layers, d_model, tokens, vocab;
};

// The linear products of one training step of bench/gpt_step's model: per layer q, k, v and the
// output projection (d x d), the feed-forward (d x 4d and 4d x d), then the head (d x vocab);
// each as its forward y = x W^T, dX = g W and dW = g^T x. Returns the best seconds of five.
double step_products(const Config& c, double& flops) {
  const int64_t d = c.d_model, n = c.tokens;
  const int64_t widest = std::max(4 * d, c.vocab);  // the widest output: the feed-forward or the head
  std::vector<float> x(static_cast<size_t>(n * 4 * d), 0.1f), y(static_cast<size_t>(n * widest), 0.2f);
  std::vector<float> w(static_cast<size_t>(widest * d), 0.01f), dw(w.size());
  struct Shape {
    int64_t in, out;
  };
  std::vector<Shape> shapes;
  for (int64_t l = 0; l < c.layers; ++l) {
    for (int i = 0; i < 4; ++i) shapes.push_back({d, d});
    shapes.push_back({d, 4 * d});
    shapes.push_back({4 * d, d});
  }
  shapes.push_back({d, c.vocab});
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    flops = 0;
    const Clock::time_point t0 = Clock::now();
    for (const Shape& s : shapes) {
      const int in = static_cast<int>(s.in), out = static_cast<int>(s.out), rows = static_cast<int>(n);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1, x.data(), in, w.data(), in, 0, y.data(),
                  out);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in, out, 1, y.data(), out, w.data(), in, 0,
                  x.data(), in);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, rows, 1, y.data(), out, x.data(), in, 0,
                  dw.data(), in);
      flops += 6.0 * static_cast<double>(n) * static_cast<double>(s.in) * static_cast<double>(s.out);
    }
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

}  // namespace

int run_main(int argc, char** argv) {
  CLI::App app{"Measures this machine's float32 FMA peak, its memory read bandwidth and OpenBLAS's throughput on a GPT "
               "step's products."};
  int threads = 2;
  std::string config = "large";
  app.add_option("--threads", threads, "threads for the FMA peak, the bandwidth and OpenBLAS")->check(CLI::Range(1, 256));
  app.add_option("--config", config, "the model whose products are timed")
      ->check(CLI::IsMember({"baby", "large", "gpt2-4x64", "gpt2-8x256"}));
  CLI11_PARSE(app, argc, argv);

  std::printf("FMA peak, 256-bit, register-only: 1 thread %.1f GFLOP/s, %d threads %.1f GFLOP/s\n", fma_peak(1),
              threads, fma_peak(threads));
  std::printf("memory read bandwidth, a sum over 1 GiB (median of 7): 1 thread %.1f GB/s, %d threads %.1f GB/s\n",
              read_bandwidth(1), threads, read_bandwidth(threads));
  openblas_set_num_threads(threads);
  // bench/gpt_step's shapes: tokens = batch * context.
  const Config c = config == "baby"        ? Config{4, 128, 32 * 128, 96}
                   : config == "large"     ? Config{6, 384, 8 * 256, 96}
                   : config == "gpt2-4x64" ? Config{12, 768, 4 * 64, 50257}
                                           : Config{12, 768, 8 * 256, 50257};
  double flops = 0;
  const double s = step_products(c, flops);
  std::printf("%s step's linear products through OpenBLAS (%d threads): %.1f GFLOP in %.1f ms = %.1f GFLOP/s\n",
              config.c_str(), threads, flops / 1e9, s * 1e3, flops / s / 1e9);
  return 0;
}

int main(int argc, char** argv) {
  return ag::bench::guarded_main("machine_peak", [&] { return run_main(argc, argv); });
}
