// Times full training steps (forward, cross-entropy, backward, Adam update) of a post-norm
// encoder: token + learned position embedding, N blocks of multi-head self-attention and a ReLU
// feed-forward with residuals and LayerNorm, a vocabulary head; float32. bench/torch_reference.py
// is the same model in PyTorch with the same flags and JSON; bench/compare.sh runs both.
//
//   build/bench/train_step --config small [--threads 2] [--steps 20] [--warmup 3] [--json] [--profile]
//   build/bench/train_step --config large --gemm-only    the step's matrix products alone
//   mpirun -np 2 build/bench/train_step --config medium --threads 1   data parallel: the same
//       global batch split over the ranks (train/dist/data_parallel.h); rank 0 reports, with the
//       share of backward during which a gradient sum was in flight (bench/compare_mpi.sh)
//
// --gemm-only times just the matrix products of one step (every Linear's forward, input- and
// weight-gradient products, and the per-head attention products, as batched products), with
// the same thread policy and the same flop count: the ceiling the whole step is measured against.
#include <CLI/CLI.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attograd.h"
#include "../tools/common/threads_flag.h"
#include "attograd/models/toy/sequence_model.h"
#include "attograd/models/toy/sequence_tasks.h"
#include "attograd/train/optim.h"
#include "guarded_main.h"

namespace {

struct Config {
  int64_t vocab, d_model, heads, d_ff, layers, seq_len, batch;
};

// (vocab, d_model, heads, d_ff, layers, T, B): the same table as bench/torch_reference.py.
const std::map<std::string, Config> kConfigs = {
    {"tiny", {16, 32, 2, 64, 2, 16, 32}},
    {"small", {32, 128, 4, 512, 2, 32, 32}},
    {"medium", {64, 256, 8, 1024, 4, 64, 32}},
    {"large", {256, 512, 8, 2048, 4, 128, 16}},
};

// Matrix-product flops of one step: the forward's, times 3 (backward does two products per one).
double step_flops(const Config& c) {
  const double tokens = static_cast<double>(c.batch * c.seq_len);
  const double d = static_cast<double>(c.d_model);
  const double per_layer = 2 * tokens * d * (3 * d) + 2 * tokens * d * d +
                           2 * 2 * static_cast<double>(c.batch * c.seq_len * c.seq_len) * d +
                           2 * 2 * tokens * d * static_cast<double>(c.d_ff);
  return 3 * (static_cast<double>(c.layers) * per_layer + 2 * tokens * d * static_cast<double>(c.vocab));
}

// One matrix product of a step: a (batch, m, k) times (batch, k, n); trans_b reads b stored as
// (batch, n, k) through a transposed view, as Linear's forward and the Q K^T product do.
struct Product {
  int64_t batch, m, k, n;
  bool trans_b;
};

// Every product of a training step: forward C = A B and its two backward products.
std::vector<Product> step_products(const Config& c) {
  const int64_t tokens = c.batch * c.seq_len, d = c.d_model, t = c.seq_len, bh = c.batch * c.heads;
  const int64_t dh = d / c.heads;
  std::vector<Product> out;
  const auto linear = [&](int64_t in, int64_t features) {
    out.push_back({1, tokens, in, features, true});    // y = x W^T
    out.push_back({1, tokens, features, in, false});   // dx = g W
    out.push_back({1, features, tokens, in, false});   // dW = g^T x (a transposed view in the op; same flops)
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    for (int i = 0; i < 4; ++i) linear(d, d);  // w_q, w_k, w_v, w_o
    linear(d, c.d_ff);
    linear(c.d_ff, d);
    out.push_back({bh, t, dh, t, true});    // S = Q K^T
    out.push_back({bh, t, t, dh, false});   // O = P V
    out.push_back({bh, t, t, dh, false});   // dV = P^T dO
    out.push_back({bh, t, dh, t, true});    // dP = dO V^T
    out.push_back({bh, t, t, dh, false});   // dQ = dS K
    out.push_back({bh, t, t, dh, false});   // dK = dS^T Q
  }
  linear(d, c.vocab);
  return out;
}

// Median ms of running every product of a step once.
double time_products(const Config& c, int64_t steps, int64_t warmup) {
  struct Operands {
    ag::Tensor a, b;
  };
  std::vector<Operands> ops;
  ag::Generator gen(1);
  for (const Product& p : step_products(c)) {
    const ag::Tensor a = ag::normal({p.batch, p.m, p.k}, 0.0, 1.0, gen);
    const ag::Tensor b = p.trans_b ? ag::normal({p.batch, p.n, p.k}, 0.0, 1.0, gen).transpose(1, 2)
                                   : ag::normal({p.batch, p.k, p.n}, 0.0, 1.0, gen);
    ops.push_back({p.batch == 1 ? a.select(0, 0) : a, p.batch == 1 ? b.select(0, 0) : b});
  }
  std::vector<double> ms;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const Operands& o : ops) ag::kernels::matmul(o.a, o.b);
    if (s >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

}  // namespace

int run_main(int argc, char** argv) {
  std::string config_name = "tiny";
  int64_t steps = 20, warmup = 3;
  std::string threads_text = "auto";
  bool json = false, profile = false, gemm_only = false;
  CLI::App app{"Times training steps of the benchmark configurations (bench/compare.sh runs it against PyTorch).",
               "train_step"};
  app.set_version_flag("--version", std::string("attograd ") + ATTOGRAD_VERSION);
  std::vector<std::string> names;
  for (const auto& [name, unused] : kConfigs) names.push_back(name);
  // --config names a benchmark shape here, not a file: CLI11's config-file option stays off.
  app.add_option("--config", config_name, "the model and batch shape")->check(CLI::IsMember(names))->capture_default_str();
  ag::add_threads_flag(app, threads_text, "threads of our pool");
  app.add_option("--steps", steps, "timed steps")->check(CLI::Range(int64_t{1}, int64_t{1000000}))->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::Range(int64_t{0}, int64_t{1000000}))->capture_default_str();
  app.add_flag("--json", json, "one JSON line instead of text");
  app.add_flag("--profile", profile, "a per-op profile of the timed steps");
  app.add_flag("--gemm-only", gemm_only, "time only the step's matrix products");
  CLI11_PARSE(app, argc, argv);
  const Config& c = kConfigs.at(config_name);

  const int64_t threads = ag::parse_threads(threads_text);
  ag::set_num_threads(static_cast<int>(threads));
  if (gemm_only) {
    const double median = time_products(c, steps, warmup);
    const double gflops = step_flops(c) / (median / 1e3) / 1e9;
    if (json) {
      std::printf("{\"framework\": \"attograd-gemm-only\", \"config\": \"%s\", \"steps\": %lld, \"median_ms\": %.6f, "
                  "\"gflops\": %.4f, \"threads\": %lld}\n",
                  config_name.c_str(), static_cast<long long>(steps), median, gflops, static_cast<long long>(threads));
    } else {
      std::printf("config %s, threads %lld: the step's matrix products alone: median %.3f ms, GFLOP/s %.1f\n",
                  config_name.c_str(), static_cast<long long>(threads), median, gflops);
    }
    return 0;
  }
  ag::manual_seed(0);
  ag::SequenceModelOptions mo;
  mo.vocab = c.vocab;
  mo.max_len = c.seq_len;
  mo.d_model = c.d_model;
  mo.n_head = c.heads;
  mo.d_ff = c.d_ff;
  mo.n_layers = c.layers;
  mo.norm_first = false;
  mo.dropout = 0.0;
  ag::SequenceModel model(mo);
  // Under mpirun: every rank trains its rows of the same global batch.
  ag::Communicator& comm = ag::Communicator::world();
  std::unique_ptr<ag::DataParallel> dp;
  ag::Shard shard{.begin = 0, .rows = c.batch};
  if (comm.size() > 1) {
    shard = ag::shard_of(c.batch, comm.rank(), comm.size(), "the configuration's batch");
    dp = std::make_unique<ag::DataParallel>(model.named_parameters(), comm);
    dp->broadcast_parameters();
  }
  ag::AdamOptions ao;
  ao.lr = 1e-3;
  ag::Adam optimizer(model.named_parameters(), ao);
  ag::SequenceTaskOptions to;
  to.kind = ag::SequenceTaskKind::reverse;
  to.vocab_size = c.vocab;
  to.seq_len = c.seq_len;
  to.batch_size = c.batch;
  const ag::SequenceTask task(to);

  ag::Profiler profiler;
  const auto step = [&](uint64_t index) {
    const ag::SequenceBatch batch = task.train_batch(index);
    optimizer.zero_grad();
    ag::Variable loss = dp ? ag::cross_entropy(model(ag::shard_rows(batch.inputs, shard)), ag::shard_rows(batch.targets, shard))
                           : ag::cross_entropy(model(batch.inputs), batch.targets);
    if (dp) dp->backward(loss);
    else loss.backward();
    ag::Profiler::Region region("optimizer step");
    optimizer.step();
  };
  for (int64_t s = 0; s < warmup; ++s) step(static_cast<uint64_t>(s));
  const ag::OverlapStats before = dp ? dp->overlap() : ag::OverlapStats{};
  std::vector<double> ms;
  for (int64_t s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    if (profile) {
      ag::ProfileScope scope(profiler);
      step(static_cast<uint64_t>(warmup + s));
    } else {
      step(static_cast<uint64_t>(warmup + s));
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  rusage usage_now{};
  getrusage(RUSAGE_SELF, &usage_now);
  const double rss_mb = static_cast<double>(usage_now.ru_maxrss) / 1024.0;
  const double tokens_per_s = static_cast<double>(c.batch * c.seq_len) / (median / 1e3);
  const double gflops = step_flops(c) / (median / 1e3) / 1e9;

  // The timed steps' overlap (warm-up excluded).
  ag::OverlapStats o;
  if (dp) {
    o = dp->overlap();
    o.backward_s -= before.backward_s;
    o.in_flight_s -= before.in_flight_s;
    o.exposed_s -= before.exposed_s;
  }
  if (!comm.is_root()) return 0;
  if (json) {
    std::printf(
        "{\"framework\": \"attograd\", \"config\": \"%s\", \"steps\": %lld, \"median_ms\": %.6f, \"min_ms\": %.6f, "
        "\"max_ms\": %.6f, \"tokens_per_s\": %.3f, \"gflops\": %.4f, \"peak_rss_mb\": %.3f, \"threads\": %lld, "
        "\"processes\": %d, \"buckets\": %lld, \"overlap_share\": %.4f, \"backward_ms\": %.4f, \"exposed_ms\": %.4f}\n",
        config_name.c_str(), static_cast<long long>(steps), median, sorted.front(), sorted.back(), tokens_per_s, gflops,
        rss_mb, static_cast<long long>(threads), comm.size(), static_cast<long long>(dp ? dp->bucket_count() : 0),
        o.share(), 1e3 * o.backward_s / static_cast<double>(steps), 1e3 * o.exposed_s / static_cast<double>(steps));
  } else {
    std::printf("config %s (vocab %lld, d_model %lld, heads %lld, d_ff %lld, layers %lld, T %lld, B %lld), threads %lld\n",
                config_name.c_str(), static_cast<long long>(c.vocab), static_cast<long long>(c.d_model),
                static_cast<long long>(c.heads), static_cast<long long>(c.d_ff), static_cast<long long>(c.layers),
                static_cast<long long>(c.seq_len), static_cast<long long>(c.batch), static_cast<long long>(threads));
    std::printf("ms/step: median %.3f  min %.3f  max %.3f   tokens/s %.0f   GFLOP/s %.1f   peak RSS %.1f MB\n", median,
                sorted.front(), sorted.back(), tokens_per_s, gflops, rss_mb);
    if (dp) {
      std::printf("%d processes, %lld rows each, %lld buckets: a gradient sum in flight %.0f%% of backward "
                  "(%.2f ms per step), %.2f ms per step waited after backward\n",
                  comm.size(), static_cast<long long>(shard.rows), static_cast<long long>(dp->bucket_count()),
                  100 * o.share(), 1e3 * o.backward_s / static_cast<double>(steps),
                  1e3 * o.exposed_s / static_cast<double>(steps));
    }
  }
  if (profile) std::cout << "\nper-op profile (" << steps << " steps)\n" << profiler.table(steps);
  return 0;
}

int main(int argc, char** argv) {
  return ag::bench::guarded_main("train_step", [&] { return run_main(argc, argv); });
}
