// Fine-tuning step of a GPT with LoRA against full fine-tuning: the median time of a training
// step (forward, cross-entropy, backward, AdamW) on random token batches, and the bytes of
// optimizer state each keeps, float32. Full fine-tuning updates every parameter; LoRA (rank R on
// the attention projections, layers/lora.h) updates only the adapters, the rest frozen as
// train_gpt --lora-rank freezes it.
//
//   build/bench/lora_step --layers 12 --heads 12 --d-model 768 --block 256 --batch 1 --vocab 50257 --rank 8
//
// bench/lora_step.sh runs the GPT-2 124M shape and writes what bench/RESULTS.md quotes.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../tools/common/threads_flag.h"
#include "attograd/core/indices.h"
#include "attograd/core/rng.h"
#include "attograd/core/threads.h"
#include "attograd/layers/lora.h"
#include "attograd/models/gpt/gpt.h"
#include "attograd/train/losses.h"
#include "attograd/train/optim.h"
#include "guarded_main.h"

namespace {

using namespace ag;

struct Args {
  int64_t layers = 12, heads = 12, d_model = 768, block = 256, batch = 1, vocab = 50257, rank = 8;
  int64_t steps = 5, warmup = 1;
  std::string threads = "2";
  std::vector<std::string> targets{"w_q", "w_k", "w_v", "w_o"};
};

struct Result {
  double median_ms = 0;
  double state_bytes = 0;
  int64_t trainable = 0;
};

Indices random_ids(const Args& a, uint64_t seed) {
  Generator gen(seed);
  const Tensor u = uniform({a.batch, a.block + 1}, 0.0, static_cast<double>(a.vocab), gen);
  std::vector<int64_t> v;
  for (double x : u.to_vector()) v.push_back(std::min<int64_t>(static_cast<int64_t>(x), a.vocab - 1));
  return Indices(Shape{a.batch, a.block + 1}, std::move(v));
}

Result time_steps(const Args& a, bool lora) {
  manual_seed(1);
  GPT model({.vocab = a.vocab, .block_size = a.block, .d_model = a.d_model, .n_head = a.heads, .n_layers = a.layers});
  if (lora) {
    apply_lora(model, a.targets, {.rank = a.rank, .alpha = static_cast<double>(a.rank)});
    for (auto& [name, p] : model.named_parameters()) {
      if (!name.ends_with(".lora_a") && !name.ends_with(".lora_b")) {
        Variable handle = p;
        handle.set_requires_grad(false);
      }
    }
  }
  const NamedVariables trainable = model.trainable_parameters();
  AdamW opt(trainable, {.lr = 1e-4});
  Result r;
  for (const auto& [name, p] : trainable) r.trainable += p.numel();
  std::vector<double> ms;
  for (int64_t s = 0; s < a.warmup + a.steps; ++s) {
    const Indices ids = random_ids(a, static_cast<uint64_t>(s));
    std::vector<int64_t> in, target;
    for (int64_t b = 0; b < a.batch; ++b) {
      const auto row = ids.data.begin() + b * (a.block + 1);
      in.insert(in.end(), row, row + a.block);
      target.insert(target.end(), row + 1, row + a.block + 1);
    }
    const auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    const Variable loss = cross_entropy(model(Indices(Shape{a.batch, a.block}, in)), Indices(Shape{a.batch, a.block}, target));
    loss.backward();
    opt.step();
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s >= a.warmup) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  r.median_ms = ms[ms.size() / 2];
  for (const auto& [name, st] : opt.state()) {
    for (const Tensor* t : {&st.exp_avg, &st.exp_avg_sq}) {
      if (t->defined()) r.state_bytes += static_cast<double>(t->numel()) * 4.0;
    }
  }
  return r;
}

}  // namespace

int run_main(int argc, char** argv) {
  Args a;
  CLI::App app{"LoRA against full fine-tuning: step time and optimizer-state bytes of a GPT.", "lora_step"};
  app.add_option("--layers", a.layers);
  app.add_option("--heads", a.heads);
  app.add_option("--d-model", a.d_model);
  app.add_option("--block", a.block);
  app.add_option("--batch", a.batch);
  app.add_option("--vocab", a.vocab);
  app.add_option("--rank", a.rank);
  app.add_option("--targets", a.targets);
  app.add_option("--steps", a.steps, "timed steps of each");
  app.add_option("--warmup", a.warmup, "untimed steps before them");
  ag::add_threads_flag(app, a.threads, "threads");
  CLI11_PARSE(app, argc, argv);
  set_num_threads(parse_threads(a.threads));
  std::printf("GPT %lld layers, %lld heads, d_model %lld, context %lld, vocab %lld, batch %lld; LoRA rank %lld on",
              static_cast<long long>(a.layers), static_cast<long long>(a.heads), static_cast<long long>(a.d_model),
              static_cast<long long>(a.block), static_cast<long long>(a.vocab), static_cast<long long>(a.batch),
              static_cast<long long>(a.rank));
  for (const std::string& t : a.targets) std::printf(" %s", t.c_str());
  std::printf("; median of %lld steps after %lld, %d threads\n", static_cast<long long>(a.steps),
              static_cast<long long>(a.warmup), num_threads());
  const Result full = time_steps(a, false);
  const Result lora = time_steps(a, true);
  std::printf("%-6s %12s %14s %18s\n", "run", "step ms", "trainable", "optimizer MiB");
  for (const auto& [name, r] : {std::pair{"full", full}, std::pair{"lora", lora}}) {
    std::printf("%-6s %12.1f %14lld %18.2f\n", name, r.median_ms, static_cast<long long>(r.trainable),
                r.state_bytes / (1024.0 * 1024.0));
  }
  std::printf("lora / full: step time %.3f, optimizer state %.5f\n", lora.median_ms / full.median_ms,
              lora.state_bytes / full.state_bytes);
  return 0;
}

int main(int argc, char** argv) {
  return ag::bench::guarded_main("lora_step", [&] { return run_main(argc, argv); });
}
