// The thread pool (core/parallel.h) and the kernels that split work over it: every index is
// visited once, errors reach the caller, a busy machine gets fewer threads and more chunks, and
// big products, attention, elementwise ops and layer norm give the same bits however the work
// is cut (and the right values, against a naive loop).
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <stdexcept>
#include <vector>

#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/gemm.h"
#include "attograd/core/parallel.h"
#include "attograd/core/threads.h"
#include "support.h"

namespace ag::testing {
namespace {

// Two threads splitting work into kChunksPerThread chunks each: three threads in the pool on a
// machine where one of them has no core.
struct TwoBusyThreads {
  ThreadCount threads{3};
  MachineLoad load{1};
};

// The three ways a job is cut, for the bit-identity tests: 0 one thread; 1 two threads on a
// quiet machine, a chunk each; 2 two threads on a busy machine, kChunksPerThread chunks each.
constexpr int kSplittings = 3;
struct Splitting {
  explicit Splitting(int way) : threads(way == 0 ? 1 : way == 1 ? 2 : 3), load(way == 2 ? 1 : 0) {}
  ThreadCount threads;
  MachineLoad load;
};

Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  const std::vector<double> va = a.contiguous().to_vector(), vb = b.contiguous().to_vector();
  std::vector<double> out(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += va[static_cast<size_t>(i * k + p)] * vb[static_cast<size_t>(p * n + j)];
      out[static_cast<size_t>(i * n + j)] = s;
    }
  }
  return from_vector(out, {m, n}, DType::f64);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector() == b.to_vector();
}

BOOST_AUTO_TEST_SUITE(parallel)

BOOST_AUTO_TEST_CASE(thread_counts_out_of_range_are_refused_and_change_nothing) {
  const int before = num_threads();
  AG_CHECK_THROWS_WITH(set_num_threads(0), std::invalid_argument, "set_num_threads", "at least 1");
  AG_CHECK_THROWS_WITH(set_num_threads(10000), std::invalid_argument, "set_num_threads", "at most 1024", "10000");
  BOOST_TEST(num_threads() == before);
}

BOOST_AUTO_TEST_CASE(parallel_for_visits_every_index_once) {
  const ThreadCount threads(2);
  for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
    for (int64_t chunks : {1, 2, 3, 5}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> empty_chunks{0};  // Boost.Test's checks are not thread-safe: checked below
      parallel_for(n, std::min(chunks, n), [&](int64_t begin, int64_t end) {
        if (begin >= end) ++empty_chunks;
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      BOOST_TEST(empty_chunks.load() == 0);
      for (int64_t i = 0; i < n; ++i) BOOST_TEST(hits[static_cast<size_t>(i)].load() == 1, "n " << n << " i " << i);
    }
  }
}

BOOST_AUTO_TEST_CASE(chunks_cover_the_range_in_order) {
  for (int64_t n : {5, 16, 17}) {
    for (int64_t chunks : {1, 2, 3, 4}) {
      int64_t expected_begin = 0;
      for (int64_t i = 0; i < chunks; ++i) {
        const auto [begin, end] = chunk_range(n, chunks, i);
        BOOST_TEST(begin == expected_begin);
        BOOST_TEST(end - begin >= n / chunks);
        BOOST_TEST(end - begin <= n / chunks + 1);
        expected_begin = end;
      }
      BOOST_TEST(expected_begin == n);
    }
  }
}

BOOST_AUTO_TEST_CASE(an_exception_in_a_chunk_reaches_the_caller) {
  const ThreadCount threads(2);
  AG_CHECK_THROWS_WITH(parallel_for(10, 2,
                                    [](int64_t begin, int64_t) {
                                      if (begin > 0) throw std::invalid_argument("chunk starting at 5 failed");
                                    }),
                       std::invalid_argument, "chunk starting at 5");
  int64_t total = 0;  // the pool still works afterwards
  std::atomic<int64_t> sum{0};
  parallel_for(10, 2, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  for (int64_t i = 0; i < 10; ++i) total += i;
  BOOST_TEST(sum.load() == total);
}

BOOST_AUTO_TEST_CASE(nested_regions_run_inline) {
  const ThreadCount threads(2);
  std::atomic<int> inner_calls{0}, outside{0}, split{0};
  // Boost.Test's checks are not thread-safe (two workers checking at once corrupt its state):
  // the workers count, the test thread checks.
  parallel_for(4, 2, [&](int64_t, int64_t) {
    if (!in_parallel_region()) ++outside;
    if (parallel_chunks(1000, 1e12) != 1) ++split;
    parallel_for(3, 3, [&](int64_t b, int64_t e) { inner_calls += static_cast<int>(e - b); });
  });
  BOOST_TEST(outside.load() == 0);
  BOOST_TEST(split.load() == 0);
  BOOST_TEST(inner_calls.load() == 6);
  BOOST_TEST(!in_parallel_region());
}

BOOST_AUTO_TEST_CASE(small_work_is_not_split) {
  const ThreadCount threads(2);
  const MachineLoad quiet(0);
  BOOST_TEST(parallel_chunks(100, kParallelMinWork / 2) == 1);
  BOOST_TEST(parallel_chunks(100, 100 * kParallelMinWork) == 2);  // a chunk a thread
  const ThreadCount one(1);
  BOOST_TEST(parallel_chunks(100, 100 * kParallelMinWork) == 1);
}

// On a busy machine the pool uses the threads that still have a core, each taking
// kChunksPerThread chunks; with no core to spare it runs the job on the calling thread alone.
BOOST_AUTO_TEST_CASE(a_busy_machine_gets_fewer_threads_and_more_chunks) {
  {
    const ThreadCount threads(2);
    const MachineLoad one_core_taken(1);
    BOOST_TEST(detail::threads_to_use() == 1);
    BOOST_TEST(parallel_chunks(100, 100 * kParallelMinWork) == 1);
  }
  {
    const ThreadCount threads(4);
    const MachineLoad one_core_taken(1);
    BOOST_TEST(detail::threads_to_use() == 3);
    BOOST_TEST(parallel_chunks(100, 100 * kParallelMinWork) == 3 * kChunksPerThread);
    BOOST_TEST(parallel_chunks(5, 100 * kParallelMinWork) == 5);            // short range
    BOOST_TEST(parallel_chunks(100, 1.5 * kParallelMinWork) == 3);          // little work
    BOOST_TEST(parallel_chunks(100, kParallelMinWork / 2) == 1);
  }
  {
    const ThreadCount threads(4);
    const MachineLoad everything_taken(10);
    BOOST_TEST(detail::threads_to_use() == 1);
  }
}

// A worker that stalls inside its first chunk (as one preempted by another program does) holds
// back that chunk only: the other threads take every other chunk instead of waiting for the
// stalled worker's share of the job.
BOOST_AUTO_TEST_CASE(a_stalled_worker_holds_back_only_its_own_chunk) {
  const TwoBusyThreads two;
  const int64_t n = 1000, chunks = parallel_chunks(n, 1e9);
  BOOST_TEST(chunks == 2 * kChunksPerThread);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mutex;
  std::thread::id stalled;
  std::atomic<int> by_stalled{0}, total{0};
  parallel_for(n, chunks, [&](int64_t, int64_t) {
    total.fetch_add(1);
    const std::thread::id me = std::this_thread::get_id();
    bool stall = false;
    {
      const std::lock_guard<std::mutex> lock(mutex);
      if (me != caller && stalled == std::thread::id()) {
        stalled = me;
        stall = true;
      }
      if (me == stalled) by_stalled.fetch_add(1);
    }
    if (stall) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  BOOST_TEST(total.load() == chunks);
  BOOST_TEST(by_stalled.load() <= 1, "the stalled worker ran " << by_stalled.load() << " chunks");
}

BOOST_AUTO_TEST_CASE(the_runnable_count_is_read_from_loadavg) {
  BOOST_TEST(detail::parse_runnable_threads("0.52 0.61 0.70 3/245 12345\n") == 3);
  BOOST_TEST(detail::parse_runnable_threads("12.00 9.10 4.70 17/1203 99") == 17);
  BOOST_TEST(detail::parse_runnable_threads("") == -1);
  BOOST_TEST(detail::parse_runnable_threads("0.52 0.61 0.70") == -1);
  BOOST_TEST(detail::parse_runnable_threads("0.52 0.61 0.70 x/245 1") == -1);
  BOOST_TEST(detail::runnable_threads() >= 1);  // this test's own thread is running
}

BOOST_AUTO_TEST_CASE(the_machine_is_busy_when_others_want_our_cores) {
  // 2 threads of ours, both awake, on 2 cores: one too many once one other thread is runnable.
  BOOST_TEST(detail::threads_in_excess(2, 2, 2, 2) == 0);
  BOOST_TEST(detail::threads_in_excess(3, 2, 2, 2) == 1);
  BOOST_TEST(detail::threads_in_excess(5, 2, 2, 2) == 3);
  // Our worker asleep: the runnable count holds one thread of ours.
  BOOST_TEST(detail::threads_in_excess(1, 1, 2, 2) == 0);
  BOOST_TEST(detail::threads_in_excess(2, 1, 2, 2) == 1);
  // Room to spare: 2 threads on 8 cores beside 5 others.
  BOOST_TEST(detail::threads_in_excess(7, 2, 2, 8) == 0);
  BOOST_TEST(detail::threads_in_excess(9, 2, 2, 8) == 1);
}

BOOST_AUTO_TEST_CASE(thread_counts_parse_auto_and_numbers) {
  BOOST_TEST(usable_cores() >= 1);
  BOOST_TEST(parse_threads("auto") == usable_cores());
  BOOST_TEST(parse_threads("auto", 1) == 1);
  BOOST_TEST(parse_threads("3") == 3);
  BOOST_TEST(parse_threads("256") == 256);
  for (const char* bad : {"0", "-1", "257", "", "two", "2x", " 2"}) {
    AG_CHECK_THROWS_WITH(parse_threads(bad), std::invalid_argument, "expected 'auto' or a whole number in [1, 256]");
  }
}

BOOST_AUTO_TEST_CASE(the_blas_note_names_older_kernels_on_a_cpu_with_avx2_and_fma) {
  const std::string note = blas_kernel_note("Prescott", true, false);
  BOOST_TEST(note.rfind("note   OpenBLAS chose its Prescott kernels", 0) == 0);
  BOOST_TEST(note.find("OPENBLAS_CORETYPE=Haswell") != std::string::npos);
  BOOST_TEST(!blas_kernel_note("SANDYBRIDGE", true, false).empty());  // AVX but no FMA kernels
  BOOST_TEST(blas_kernel_note("Haswell", true, false).empty());       // the right kernels
  BOOST_TEST(blas_kernel_note("Zen", true, false).empty());
  BOOST_TEST(blas_kernel_note("Prescott", false, false).empty());     // an old CPU: nothing better
  BOOST_TEST(blas_kernel_note("Prescott", true, true).empty());       // the user chose them
}

BOOST_AUTO_TEST_CASE(products_are_cut_at_12_rows_on_haswell_and_zen_kernels_and_48_elsewhere) {
  // 12 keeps the bits on Haswell and Zen (the suite's second run, on_haswell_kernels.sh, holds
  // it on real products) and splits 256 rows 132 / 124 where 48 gives 144 / 112.
  BOOST_TEST(gemm_row_alignment("Haswell") == 12);
  BOOST_TEST(gemm_row_alignment("Zen") == 12);
  BOOST_TEST(gemm_row_alignment("Prescott") == 48);
  BOOST_TEST(gemm_row_alignment("SkylakeX") == 48);  // not measured here: the safe step
  BOOST_TEST(gemm_row_alignment("") == 48);
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  if (core != nullptr && std::string_view(core) == "Haswell") BOOST_TEST(gemm_row_alignment() == 12);
}

// Shapes big enough to be split: by rows (row counts that are no multiple of OpenBLAS's
// unrolls, so the pieces' edges decide which rows take a kernel's tail loop), with a
// transposed operand, and by batch item. On a CPU whose float32 kernel takes rows 12 at a
// time, pieces aligned to 64 rows failed here.
BOOST_AUTO_TEST_CASE(big_products_give_the_same_bits_with_one_and_two_threads) {
  struct Case {
    Shape a, b;
    bool transpose_b;
  };
  const std::vector<Case> cases = {{{300, 120}, {120, 200}, false},
                                   {{130, 120}, {120, 400}, false},
                                   {{257, 130}, {150, 130}, true},
                                   {{256, 96}, {96, 300}, false},  // cut at 132 with a step of 12, 144 with 48
                                   {{6, 64, 80}, {6, 80, 150}, false}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    for (DType dtype : {DType::f32, DType::f64}) {
      Generator gen(seed++);
      const Tensor a = normal(c.a, 0.0, 1.0, gen, dtype);
      const Tensor b_stored = normal(c.b, 0.0, 1.0, gen, dtype);
      const Tensor b = c.transpose_b ? b_stored.t() : b_stored;
      BOOST_TEST_CONTEXT("a " << c.a << " b " << b.shape() << " " << dtype_name(dtype)) {
        BOOST_REQUIRE(2.0 * static_cast<double>(a.numel()) * static_cast<double>(b.shape()[-1]) > 2 * kParallelMinWork);
        Tensor out[kSplittings];
        for (int way = 0; way < kSplittings; ++way) {
          const Splitting split(way);
          out[way] = kernels::matmul(a, b);
        }
        const Tensor& two = out[2];
        BOOST_TEST(same_bits(out[0], out[1]));
        BOOST_TEST(same_bits(out[0], out[2]));
        if (a.dim() == 2) {
          const double tol = dtype == DType::f32 ? 1e-3 : 1e-10;
          BOOST_TEST(max_abs_diff(two.to(DType::f64), naive_matmul(a.to(DType::f64), b.to(DType::f64))) < tol);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_fused_bias_equals_adding_it_after_the_product) {
  for (const Shape& a_shape : {Shape{5, 7}, Shape{300, 120}, Shape{2, 3, 7}}) {
    Generator gen(11);
    const Tensor a = normal(a_shape, 0.0, 1.0, gen, DType::f64);
    const Tensor w = normal({9, a_shape[-1]}, 0.0, 1.0, gen, DType::f64);
    const Tensor bias = normal({9}, 0.0, 1.0, gen, DType::f64);
    const Tensor fused = kernels::matmul(a, w.t(), bias);
    const Tensor composed = kernels::add(kernels::matmul(a, w.t()), bias);
    BOOST_TEST(max_abs_diff(fused, composed) < 1e-12, "a " << a_shape);
  }
  // A strided bias (every other element of a longer vector) and f32 rows.
  for (const DType dtype : {DType::f32, DType::f64}) {
    Generator gen(13);
    const Tensor a = normal({2, 6, 5}, 0.0, 1.0, gen, dtype);
    const Tensor w = normal({4, 5}, 0.0, 1.0, gen, dtype);
    const Tensor every_other = normal({8}, 0.0, 1.0, gen, dtype).slice(0, 0, 8, 2);
    BOOST_TEST(!every_other.is_contiguous());
    const Tensor fused = kernels::matmul(a, w.t(), every_other);
    const Tensor composed = kernels::add(kernels::matmul(a, w.t()), every_other);
    BOOST_TEST(max_abs_diff(fused.to(DType::f64), composed.to(DType::f64)) < (dtype == DType::f32 ? 1e-5 : 1e-12));
  }
  Generator gen(12);
  const Tensor a = normal({4, 3}, 0.0, 1.0, gen, DType::f64);
  const Tensor b = normal({3, 5}, 0.0, 1.0, gen, DType::f64);
  AG_CHECK_THROWS_WITH(kernels::matmul(a, b, zeros({4}, DType::f64)), std::invalid_argument, "matmul", "bias", "(4,)",
                       "(5,)");
}

BOOST_AUTO_TEST_CASE(attention_split_over_heads_gives_the_same_bits) {
  const int64_t B = 4, H = 4, T = 64, D = 32;
  Generator gen(21);
  const Tensor q = normal({B, H, T, D}, 0.0, 1.0, gen);
  const Tensor k = normal({B, T, H, D}, 0.0, 1.0, gen).permute({0, 2, 1, 3});  // strided, as in the layer
  const Tensor v = normal({B, H, T, D}, 0.0, 1.0, gen);
  const Tensor g = normal({B, H, T, D}, 0.0, 1.0, gen);
  kernels::AttentionForward f[kSplittings];
  kernels::AttentionGrads d[kSplittings];
  for (int way = 0; way < kSplittings; ++way) {
    const Splitting split(way);
    BOOST_REQUIRE(parallel_chunks(B * H, 4.0 * B * H * T * T * 2 * D) == (way == 0 ? 1 : way == 1 ? 2 : 8));
    f[way] = kernels::attention_forward(q, k, v, AttentionMask(), Tensor(), 0.125, kernels::DropoutMask{});
    d[way] = kernels::attention_backward(g, q, k, v, f[way].weights, 0.125, kernels::DropoutMask{}, true, true, true,
                                         false);
  }
  for (int way = 1; way < kSplittings; ++way) {
    BOOST_TEST(same_bits(f[0].output, f[way].output));
    BOOST_TEST(same_bits(f[0].weights, f[way].weights));
    BOOST_TEST(same_bits(d[0].dq, d[way].dq));
    BOOST_TEST(same_bits(d[0].dk, d[way].dk));
    BOOST_TEST(same_bits(d[0].dv, d[way].dv));
  }
}

// Contiguous elementwise loops over 1.2M elements are split over the pool: same bits with 1
// and 2 threads, and the same bits as the strided walk that a transposed operand takes.
BOOST_AUTO_TEST_CASE(big_elementwise_ops_give_the_same_bits_split_or_strided) {
  for (DType dtype : {DType::f32, DType::f64}) {
    BOOST_TEST_CONTEXT(dtype_name(dtype)) {
      Generator gen(41);
      const Tensor a = normal({1200, 1001}, 0.0, 1.0, gen, dtype);
      const Tensor b = normal({1200, 1001}, 0.0, 1.0, gen, dtype);
      // The same values through transposed views: the strided path of every kernel.
      const Tensor at = a.t().contiguous().t();
      const Tensor bt = b.t().contiguous().t();
      BOOST_REQUIRE(!at.is_contiguous());
      std::vector<Tensor> results[kSplittings];
      for (int way = 0; way < kSplittings; ++way) {
        const Splitting split(way);
        BOOST_REQUIRE(parallel_chunks(a.numel(), 4.0 * static_cast<double>(a.numel())) == (way == 0 ? 1 : way == 1 ? 2 : 8));
        std::vector<Tensor>& r = results[way];
        r.push_back(kernels::add(a, b));
        r.push_back(kernels::relu_backward(a, b));
        r.push_back(kernels::unary(kernels::UnaryOp::relu, a));
        r.push_back(kernels::affine(a, 0.5, 2.0));
        Tensor acc = a.clone();
        kernels::add_(acc, b, 0.25);
        r.push_back(acc);
      }
      Tensor acc = a.clone();
      kernels::add_(acc, bt, 0.25);
      const std::vector<Tensor> strided = {kernels::add(at, bt), kernels::relu_backward(at, bt),
                                           kernels::unary(kernels::UnaryOp::relu, at), kernels::affine(at, 0.5, 2.0),
                                           acc};
      for (size_t i = 0; i < strided.size(); ++i) {
        BOOST_TEST(same_bits(results[0][i], results[1][i]), "op " << i);
        BOOST_TEST(same_bits(results[0][i], results[2][i]), "op " << i);
        BOOST_TEST(same_bits(results[0][i], strided[i]), "op " << i);
      }
      // And the values themselves: relu_grad passes b where a > 0, add_ adds 0.25 b.
      const std::vector<double> va = a.to_vector(), vb = b.to_vector(), vg = results[1][1].to_vector();
      const std::vector<double> vacc = results[1][4].to_vector();
      bool right = true;
      for (size_t i = 0; i < va.size(); ++i) {
        right = right && vg[i] == (va[i] > 0 ? vb[i] : 0.0);
        right = right && std::abs(vacc[i] - (va[i] + 0.25 * vb[i])) <= 1e-6 * (1 + std::abs(va[i]) + std::abs(vb[i]));
      }
      BOOST_TEST(right);
    }
  }
}

// LayerNorm's backward sums the weight and bias gradients over rows in fixed blocks of rows,
// whatever the thread count: same bits with 1 and 2 threads, and the f64 values within f32
// rounding. 1500 x 520: several blocks, the last one short, rows not a multiple of the lanes.
BOOST_AUTO_TEST_CASE(layer_norm_gives_the_same_bits_with_one_and_two_threads) {
  const Shape shape{3, 500, 520};
  Generator gen(31);
  const Tensor x = normal(shape, 0.5, 2.0, gen);
  const Tensor w = normal({520}, 1.0, 0.3, gen);
  const Tensor b = normal({520}, 0.0, 0.3, gen);
  const Tensor g = normal(shape, 0.0, 1.0, gen);
  kernels::LayerNormForward f[kSplittings];
  kernels::LayerNormGrads d[kSplittings];
  for (int way = 0; way < kSplittings; ++way) {
    const Splitting split(way);
    BOOST_REQUIRE(parallel_chunks(1500, 8.0 * static_cast<double>(shape.numel())) == (way == 0 ? 1 : way == 1 ? 2 : 8));
    f[way] = kernels::layer_norm_forward(x, w, b, 1, 1e-5);
    d[way] = kernels::layer_norm_backward(g, x, f[way].mean, f[way].rstd, w, 1, true, true, true);
  }
  for (int way = 1; way < kSplittings; ++way) {
    BOOST_TEST(same_bits(f[0].y, f[way].y));
    BOOST_TEST(same_bits(d[0].dx, d[way].dx));
    BOOST_TEST(same_bits(d[0].dweight, d[way].dweight));
    BOOST_TEST(same_bits(d[0].dbias, d[way].dbias));
  }
  const auto f64 = [](const Tensor& t) { return t.to(DType::f64); };
  const kernels::LayerNormForward f_ref = kernels::layer_norm_forward(f64(x), f64(w), f64(b), 1, 1e-5);
  const kernels::LayerNormGrads d_ref =
      kernels::layer_norm_backward(f64(g), f64(x), f_ref.mean, f_ref.rstd, f64(w), 1, true, true, true);
  BOOST_TEST(max_abs_diff(f64(f[1].y), f_ref.y) < 1e-5);
  BOOST_TEST(max_abs_diff(f64(d[1].dx), d_ref.dx) < 1e-4);
  // Column sums over 1500 rows: relative to their size.
  BOOST_TEST(max_abs_diff(f64(d[1].dweight), d_ref.dweight) < 1e-5 * 1500);
  BOOST_TEST(max_abs_diff(f64(d[1].dbias), d_ref.dbias) < 1e-5 * 1500);
}

BOOST_AUTO_TEST_CASE(cross_entropy_gives_the_same_bits_with_one_and_two_threads_and_in_place) {
  // 128 rows of 1000 classes (an ignored row and smoothing included): the rows are shared out
  // whole, so every splitting gives the same losses, log-sum-exps and gradient; the gradient
  // written over the logits equals the one written beside them.
  Generator gen(37);
  const Tensor logits = normal({128, 1000}, 0.0, 3.0, gen);
  std::vector<int64_t> t(128);
  for (int64_t i = 0; i < 128; ++i) t[static_cast<size_t>(i)] = i == 5 ? -100 : (i * 37) % 1000;
  const Indices targets({128}, t);
  const Tensor rows = normal({128}, 0.0, 1.0, gen);
  kernels::CrossEntropyForward f[kSplittings];
  Tensor d[kSplittings];
  for (int way = 0; way < kSplittings; ++way) {
    const Splitting split(way);
    BOOST_REQUIRE(parallel_chunks(128, 20.0 * 128 * 1000) == (way == 0 ? 1 : way == 1 ? 2 : 8));
    f[way] = kernels::cross_entropy_forward(logits, targets, -100, 0.1);
    d[way] = kernels::cross_entropy_backward(logits, f[way].lse, targets, -100, 0.1, rows);
  }
  for (int way = 1; way < kSplittings; ++way) {
    BOOST_TEST(same_bits(f[0].losses, f[way].losses));
    BOOST_TEST(same_bits(f[0].lse, f[way].lse));
    BOOST_TEST(same_bits(d[0], d[way]));
  }
  Tensor in_place = logits.clone();
  kernels::cross_entropy_backward_(in_place, f[0].lse, targets, -100, 0.1, rows);
  BOOST_TEST(same_bits(in_place, d[0]));
  Tensor strided = logits.clone().t();
  AG_CHECK_THROWS_WITH(kernels::cross_entropy_backward_(strided, f[0].lse, targets, -100, 0.1, rows),
                       std::invalid_argument, "cross_entropy_backward_", "contiguous");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
