// Times the GPT of models/gpt/gpt.h: full training steps (forward, cross-entropy over (B*T, vocab)
// through GPT::loss as the trainer takes it, backward, AdamW update) on random token batches, or greedy generation with and without the KV
// cache; float32. bench/torch_gpt.py is the same model in PyTorch with the same flags and JSON;
// bench/compare_gpt.sh runs both.
//
//   build/bench/gpt_step --config baby [--threads 2] [--steps 20] [--warmup 3] [--json] [--profile]
//   build/bench/gpt_step --config gpt2-2x1024 --recompute      (activation recompute per block)
//   build/bench/gpt_step --config large --generate 127 [--no-cache] [--repeats 3] [--json]
//
// --generate N draws N tokens greedily from a one-token prompt, batch 1, in eval mode. N is at
// most 127 so that the context never exceeds 128 tokens and the window never slides: both
// frameworks then do the same work, one position per token with the cache and a forward over
// the whole sequence so far per token without it.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "../tools/common/threads_flag.h"
#include "attograd/autograd/profiler.h"
#include "attograd/core/indices.h"
#include "attograd/core/rng.h"
#include "attograd/core/threads.h"
#include "attograd/models/gpt/generate.h"
#include "attograd/models/gpt/gpt.h"
#include "attograd/train/losses.h"
#include "attograd/train/optim.h"
#include "guarded_main.h"
#include "step_support.h"

namespace {

using ag::bench::median_of;
using ag::bench::peak_rss_mb;

struct Config {
  int64_t layers, heads, d_model, block, batch, vocab;
};

// (layers, heads, d_model, block, batch, vocab): the same table as bench/torch_gpt.py. The
// vocabulary of 96 is a character vocabulary (printable ASCII and a few more). The gpt2-*
// shapes are GPT-2 124M's (12 layers, 12 heads, d_model 768, GPT-2's 50,257 tokens) at
// batch x context 4 x 64 (llm.c's CPU default), 8 x 256, and 2 x 1024 and 8 x 1024 (the full
// context, where --recompute matters most; at 8 rows the activations outweigh the AdamW state).
const std::map<std::string, Config> kConfigs = {
    {"baby", {4, 4, 128, 128, 32, 96}},
    {"large", {6, 6, 384, 256, 8, 96}},
    {"gpt2-4x64", {12, 12, 768, 64, 4, 50257}},
    {"gpt2-8x256", {12, 12, 768, 256, 8, 50257}},
    {"gpt2-2x1024", {12, 12, 768, 1024, 2, 50257}},
    {"gpt2-8x1024", {12, 12, 768, 1024, 8, 50257}},
};

// Matrix-product flops of one step: the forward's, times 3 (backward does two products per
// one). Attention counts the full T x T score matrix, as both frameworks compute it and mask.
double step_flops(const Config& c) {
  const double tokens = static_cast<double>(c.batch * c.block);
  const double d = static_cast<double>(c.d_model);
  const double per_layer = 2 * tokens * d * (3 * d) + 2 * tokens * d * d +
                           2 * 2 * static_cast<double>(c.batch * c.block * c.block) * d + 2 * 2 * tokens * d * (4 * d);
  return 3 * (static_cast<double>(c.layers) * per_layer + 2 * tokens * d * static_cast<double>(c.vocab));
}

ag::GPTOptions model_options(const Config& c) {
  ag::GPTOptions o;
  o.vocab = c.vocab;
  o.block_size = c.block;
  o.d_model = c.d_model;
  o.n_head = c.heads;
  o.n_layers = c.layers;
  o.dropout = 0.0;
  o.bias = true;
  return o;
}

// A cheap fingerprint of the generated tokens, so that the cached and uncached runs (and the
// script) can see that they produced the same sequence.
uint64_t fingerprint(const std::vector<int64_t>& tokens) {
  uint64_t h = 1469598103934665603ull;
  for (const int64_t t : tokens) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return h;
}

int run_generate(const std::string& config_name, const Config& c, int64_t new_tokens, bool use_cache,
                 int64_t repeats, int64_t warmup, int64_t threads, bool json) {
  ag::manual_seed(0);
  ag::GPT model(model_options(c));
  model.eval();
  ag::GenerateOptions go;
  go.max_new_tokens = new_tokens;
  go.sampling.temperature = 0.0;  // greedy: no sampling cost, and the same tokens on both paths
  go.use_cache = use_cache;
  const std::vector<int64_t> prompt = {0};
  std::vector<int64_t> tokens;
  // At least one untimed generation: the first one pays for the allocator's first blocks.
  for (int64_t r = 0; r < std::max<int64_t>(warmup, 1); ++r) tokens = ag::generate(model, prompt, go);
  std::vector<double> ms;
  for (int64_t r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    tokens = ag::generate(model, prompt, go);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double median = median_of(ms);
  const double best = *std::min_element(ms.begin(), ms.end());
  const double tokens_per_s = static_cast<double>(new_tokens) / (median / 1e3);
  if (json) {
    std::printf(
        "{\"framework\": \"attograd\", \"mode\": \"generate\", \"config\": \"%s\", \"cache\": %s, \"new_tokens\": %lld, "
        "\"repeats\": %lld, \"median_ms\": %.6f, \"min_ms\": %.6f, \"tokens_per_s\": %.3f, \"max_tokens_per_s\": %.3f, "
        "\"fingerprint\": \"%016llx\", \"peak_rss_mb\": %.3f, \"threads\": %lld}\n",
        config_name.c_str(), use_cache ? "true" : "false", static_cast<long long>(new_tokens),
        static_cast<long long>(repeats), median, best, tokens_per_s,
        static_cast<double>(new_tokens) / (best / 1e3), static_cast<unsigned long long>(fingerprint(tokens)),
        peak_rss_mb(), static_cast<long long>(threads));
  } else {
    std::printf("config %s, greedy generation of %lld tokens from a 1-token prompt, %s, threads %lld\n",
                config_name.c_str(), static_cast<long long>(new_tokens), use_cache ? "KV cache" : "no cache (full recompute)",
                static_cast<long long>(threads));
    std::printf("ms per generation: median %.3f  min %.3f   tokens/s %.1f   fingerprint %016llx   peak RSS %.1f MB\n",
                median, best, tokens_per_s, static_cast<unsigned long long>(fingerprint(tokens)), peak_rss_mb());
  }
  return 0;
}

}  // namespace

int run_main(int argc, char** argv) {
  std::string config_name = "baby";
  int64_t steps = 20, warmup = 3, generate_tokens = 0, repeats = 3;
  std::string threads_text = "auto";
  bool json = false, profile = false, no_cache = false, recompute = false;
  CLI::App app{"Times GPT training steps or generation (bench/compare_gpt.sh runs it against PyTorch).", "gpt_step"};
  app.set_version_flag("--version", std::string("attograd ") + ATTOGRAD_VERSION);
  std::vector<std::string> names;
  for (const auto& [name, unused] : kConfigs) names.push_back(name);
  // --config names a benchmark shape here, not a file: CLI11's config-file option stays off.
  app.add_option("--config", config_name, "the model and batch shape")->check(CLI::IsMember(names))->capture_default_str();
  ag::add_threads_flag(app, threads_text, "threads of our pool");
  app.add_option("--steps", steps, "timed training steps")->check(CLI::Range(int64_t{1}, int64_t{1000000}))->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps (or generations) first")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->capture_default_str();
  app.add_option("--generate", generate_tokens, "instead of training, time greedy generation of this many tokens")
      ->check(CLI::Range(int64_t{1}, int64_t{127}));
  app.add_flag("--no-cache", no_cache, "with --generate: recompute the whole sequence for every token");
  app.add_option("--repeats", repeats, "with --generate: timed generations")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  app.add_flag("--recompute", recompute, "training: keep only each block's input, run the block again in backward");
  app.add_flag("--json", json, "one JSON line instead of text");
  app.add_flag("--profile", profile, "a per-op profile of the timed steps");
  CLI11_PARSE(app, argc, argv);
  const Config& c = kConfigs.at(config_name);

  const int64_t threads = ag::parse_threads(threads_text);
  ag::set_num_threads(static_cast<int>(threads));
  if (generate_tokens > 0) return run_generate(config_name, c, generate_tokens, !no_cache, repeats, warmup, threads, json);

  ag::manual_seed(0);
  ag::GPT model(model_options(c));
  model.train();
  model.set_recompute(recompute);
  ag::AdamWOptions ao;
  ao.lr = 1e-3;  // weight decay stays at AdamW's default 0.01, as in PyTorch
  ag::AdamW optimizer(model.named_parameters(), ao);
  constexpr uint64_t kDataSeed = 1;

  ag::Profiler profiler;
  ag::Indices inputs, targets;
  const auto step = [&](uint64_t index) {
    ag::bench::random_batch(c.batch, c.block, c.vocab, kDataSeed, index, inputs, targets);
    optimizer.zero_grad();
    ag::Variable loss = model.loss(inputs, targets);
    loss.backward();
    ag::Profiler::Region region("optimizer step");
    optimizer.step();
  };
  for (int64_t s = 0; s < warmup; ++s) step(static_cast<uint64_t>(s));
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
  const double median = median_of(ms);
  const double best = *std::min_element(ms.begin(), ms.end());
  const double worst = *std::max_element(ms.begin(), ms.end());
  const double tokens_per_s = static_cast<double>(c.batch * c.block) / (median / 1e3);
  const double gflops = step_flops(c) / (median / 1e3) / 1e9;
  const int64_t params = model.num_parameters();

  if (json) {
    std::printf(
        "{\"framework\": \"attograd\", \"config\": \"%s\", \"steps\": %lld, \"median_ms\": %.6f, \"min_ms\": %.6f, "
        "\"max_ms\": %.6f, \"tokens_per_s\": %.3f, \"gflops\": %.4f, \"peak_rss_mb\": %.3f, \"parameters\": %lld, "
        "\"threads\": %lld, \"recompute\": %s, \"peak_live_mb\": %.3f}\n",
        config_name.c_str(), static_cast<long long>(steps), median, best, worst, tokens_per_s, gflops, peak_rss_mb(),
        static_cast<long long>(params), static_cast<long long>(threads), recompute ? "true" : "false",
        static_cast<double>(ag::memory_stats().high_water_live) / (1 << 20));
  } else {
    std::printf("config %s (layers %lld, heads %lld, d_model %lld, T %lld, B %lld, vocab %lld, %lld parameters), threads %lld\n",
                config_name.c_str(), static_cast<long long>(c.layers), static_cast<long long>(c.heads),
                static_cast<long long>(c.d_model), static_cast<long long>(c.block), static_cast<long long>(c.batch),
                static_cast<long long>(c.vocab), static_cast<long long>(params), static_cast<long long>(threads));
    std::printf("ms/step: median %.3f  min %.3f  max %.3f   tokens/s %.0f   GFLOP/s %.1f   peak RSS %.1f MB\n", median,
                best, worst, tokens_per_s, gflops, peak_rss_mb());
    // What the tensors themselves hold, of that RSS: the most bytes live at once, and live plus
    // the storage cache's freed blocks.
    const ag::MemoryStats m = ag::memory_stats();
    std::printf("tensor blocks: peak live %.1f MB, peak held %.1f MB\n", static_cast<double>(m.high_water_live) / (1 << 20),
                static_cast<double>(m.peak_held) / (1 << 20));
  }
  if (profile) std::cout << "\nper-op profile (" << steps << " steps)\n" << profiler.table(steps);
  return 0;
}

int main(int argc, char** argv) {
  return ag::bench::guarded_main("gpt_step", [&] { return run_main(argc, argv); });
}
