// Times the Llama family (models/llama/llama.h): full training steps (forward, the chunked
// cross-entropy of Llama::loss, backward, AdamW) on random token batches, or batch-1 greedy
// generation through the KV cache; float32. bench/torch_llama_step.py is the PyTorch twin
// (tests/parity/torch_llama.py) with the same flags and JSON; bench/compare_llama.sh runs both,
// interleaved.
//
//   build/bench/llama_step --config smollm2-4x256 [--threads 2] [--steps 5] [--warmup 1] [--json]
//   build/bench/llama_step --config smollm2-4x256 --generate 64 [--repeats 3] [--json]
//
// The shapes: SmolLM2-135M's (30 layers, d_model 576, 9 query heads over 3 key/value heads,
// SwiGLU of 1536, 49,152 tokens, tied) at batch x context 4 x 256, and llama-tiny's (4 layers,
// 128 wide, 256 byte tokens) at 16 x 256.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../tools/common/threads_flag.h"
#include "attograd/core/indices.h"
#include "attograd/core/rng.h"
#include "attograd/core/threads.h"
#include "attograd/models/llama/llama.h"
#include "attograd/models/llama/llama_generate.h"
#include "attograd/train/optim.h"
#include "guarded_main.h"
#include "step_support.h"

namespace {

using ag::bench::median_of;
using ag::bench::peak_rss_mb;

struct Config {
  const char* preset;
  int64_t batch, block;
};
const std::map<std::string, Config> kConfigs = {
    {"smollm2-4x256", {"smollm2-135m", 4, 256}},
    {"tiny-16x256", {"llama-tiny", 16, 256}},
};

// Matrix-product flops of one training step: the forward's times 3. Attention counts the full
// T x T scores (both frameworks compute them and mask).
double step_flops(const ag::LlamaOptions& o, const Config& c) {
  const double tokens = static_cast<double>(c.batch * c.block), d = static_cast<double>(o.d_model);
  const double q = static_cast<double>(o.n_head * o.head_dim), kv = static_cast<double>(o.n_kv_head * o.head_dim);
  const double per_layer = 2 * tokens * d * (2 * q + 2 * kv) + 2 * tokens * d * 3 * static_cast<double>(o.d_hidden) +
                           2 * 2 * static_cast<double>(c.batch * c.block * c.block) * q;
  return 3 * (static_cast<double>(o.n_layers) * per_layer + 2 * tokens * d * static_cast<double>(o.vocab));
}

}  // namespace

int run_main(int argc, char** argv) {
  std::string config_name = "tiny-16x256", threads_text = "auto";
  int64_t steps = 5, warmup = 1, generate_tokens = 0, repeats = 3;
  bool json = false;
  CLI::App app{"Times Llama-family training steps or generation (bench/compare_llama.sh runs it against PyTorch).",
               "llama_step"};
  std::vector<std::string> names;
  for (const auto& [name, unused] : kConfigs) names.push_back(name);
  app.add_option("--config", config_name, "the model and batch shape")->check(CLI::IsMember(names))->capture_default_str();
  ag::add_threads_flag(app, threads_text, "threads of our pool");
  app.add_option("--steps", steps, "timed training steps")->check(CLI::Range(int64_t{1}, int64_t{100000}))->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps (or generations) first")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}))
      ->capture_default_str();
  app.add_option("--generate", generate_tokens, "instead of training, time batch-1 greedy generation of N tokens")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--repeats", repeats, "with --generate: timed generations")->check(CLI::Range(int64_t{1}, int64_t{100}));
  app.add_flag("--json", json, "one JSON line instead of text");
  CLI11_PARSE(app, argc, argv);
  const Config& c = kConfigs.at(config_name);
  const int64_t threads = ag::parse_threads(threads_text);
  ag::set_num_threads(static_cast<int>(threads));
  ag::manual_seed(0);
  ag::Llama model(ag::llama_preset(c.preset));
  const ag::LlamaOptions& o = model.options();

  if (generate_tokens > 0) {
    model.eval();
    ag::GenerateOptions go;
    go.max_new_tokens = generate_tokens;
    go.sampling.temperature = 0.0;
    const std::vector<int64_t> prompt = {1};
    std::vector<int64_t> tokens;
    for (int64_t r = 0; r < std::max<int64_t>(warmup, 1); ++r) tokens = ag::generate(model, prompt, go);
    std::vector<double> ms;
    for (int64_t r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      tokens = ag::generate(model, prompt, go);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const double tokens_per_s = static_cast<double>(generate_tokens) / (median_of(ms) / 1e3);
    // What a cached token reads: every weight once (an untied table only its one row, the tied
    // one whole as the head) and the cache so far, on average 1 + n/2 positions of every layer.
    const ag::LlamaOptions r = ag::resolved(o);
    const double weights = static_cast<double>(model.num_parameters() - (o.tie_word_embeddings ? 0 : o.vocab * o.d_model));
    const double cache = static_cast<double>(r.n_layers * 2 * r.n_kv_head * r.head_dim) *
                         (1.0 + static_cast<double>(generate_tokens) / 2.0);
    const double bytes_per_token = 4.0 * (weights + cache);
    uint64_t h = 1469598103934665603ull;
    for (const int64_t t : tokens) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    std::printf(json ? "{\"framework\": \"attograd\", \"mode\": \"generate\", \"config\": \"%s\", \"new_tokens\": %lld, "
                       "\"median_ms\": %.3f, \"tokens_per_s\": %.3f, \"fingerprint\": \"%016llx\", \"peak_rss_mb\": %.1f, "
                       "\"threads\": %lld, \"bytes_per_token\": %.0f}\n"
                     : "config %s, greedy generation of %lld tokens at batch 1 with the cache: median %.1f ms, %.2f "
                       "tokens/s, fingerprint %016llx, peak RSS %.1f MB, threads %lld, %.0f bytes read per token\n",
                config_name.c_str(), static_cast<long long>(generate_tokens), median_of(ms), tokens_per_s,
                static_cast<unsigned long long>(h), peak_rss_mb(), static_cast<long long>(threads), bytes_per_token);
    return 0;
  }

  model.train();
  ag::AdamWOptions ao;
  ao.lr = 1e-3;
  ag::AdamW optimizer(model.named_parameters(), ao);
  ag::Indices inputs, targets;
  double last_loss = 0;
  const auto step = [&](uint64_t index) {
    ag::bench::random_batch(c.batch, c.block, o.vocab, 1, index, inputs, targets);
    optimizer.zero_grad();
    ag::Variable loss = model.loss(inputs, targets);
    last_loss = loss.item();
    loss.backward();
    optimizer.step();
  };
  for (int64_t s = 0; s < warmup; ++s) step(static_cast<uint64_t>(s));
  std::vector<double> ms;
  for (int64_t s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    step(static_cast<uint64_t>(warmup + s));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double median = median_of(ms);
  const double gflops = step_flops(o, c) / (median / 1e3) / 1e9;
  std::printf(json ? "{\"framework\": \"attograd\", \"mode\": \"train\", \"config\": \"%s\", \"steps\": %lld, "
                     "\"median_ms\": %.3f, \"gflops\": %.2f, \"peak_rss_mb\": %.1f, \"parameters\": %lld, "
                     "\"last_loss\": %.4f, \"threads\": %lld}\n"
                   : "config %s, %lld timed steps: median %.1f ms/step, %.1f GFLOP/s, peak RSS %.1f MB, %lld "
                     "parameters, last loss %.4f, threads %lld\n",
              config_name.c_str(), static_cast<long long>(steps), median, gflops, peak_rss_mb(),
              static_cast<long long>(model.num_parameters()), last_loss, static_cast<long long>(threads));
  return 0;
}

int main(int argc, char** argv) {
  return ag::bench::guarded_main("llama_step", [&] { return run_main(argc, argv); });
}
