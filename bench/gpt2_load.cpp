// Times GPT-2 (a preset of models/gpt.h) coming in from a weights file, and optionally its cached
// generation: bench/compare_gpt2.sh runs it under /usr/bin/time -v beside bench/torch_gpt2.py.
//
//   build/bench/gpt2_load --weights /tmp/gpt2-bench/model.safetensors           build + import
//   build/bench/gpt2_load --weights FILE --generate 100 --repeats 3 [--threads 2] [--logits out.bin]
//
// Prints one JSON line: the layout, the seconds to build the model and to read the file into it,
// and with --generate the greedy tokens/s at batch 1 with the KV cache (best of the repeats; the
// first token is the prompt's, the rest one position each) and a fingerprint of the tokens.
// --logits writes the float32 logits of ids 0..T-1 (T = 64) for a parity check against PyTorch.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <iostream>
#include <string>
#include <vector>

#include "../examples/threads_flag.h"
#include "attograd/autograd/grad_mode.h"
#include "attograd/core/skip_init.h"
#include "attograd/core/threads.h"
#include "attograd/models/generate.h"
#include "attograd/models/gpt.h"
#include "attograd/train/io/gpt_weights.h"

namespace {

using namespace ag;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::string weights, preset = "gpt2", threads = "2", logits_path;
  int64_t gen = 0, repeats = 3;
  bool draw = false;
  CLI::App app{"GPT-2 from a weights file: build and import time, cached greedy generation."};
  app.add_option("--weights", weights, "a file in any layout read_gpt_weights reads")->required();
  app.add_option("--preset", preset, "the model's shape");
  app.add_option("--generate", gen, "tokens to generate greedily (0: none)");
  app.add_option("--repeats", repeats, "timed generations");
  app.add_option("--logits", logits_path, "write the float32 logits of ids 0..63 here");
  app.add_flag("--draw-init", draw, "draw the initial weights before the import (as a fresh model does)");
  add_threads_flag(app, threads, "threads");
  CLI11_PARSE(app, argc, argv);
  set_num_threads(parse_threads(threads));

  const Clock::time_point t0 = Clock::now();
  GPTOptions o = gpt_preset(preset);
  o.dropout = 0.0;
  std::optional<SkipInitGuard> no_init;  // as train_gpt --init-from builds it
  if (!draw) no_init.emplace();
  GPT model(o);
  no_init.reset();
  const double build_s = since(t0);
  const Clock::time_point t1 = Clock::now();
  const GPTWeightsLayout layout = read_gpt_weights(model, weights);
  const double import_s = since(t1);
  model.eval();

  std::printf("{\"layout\":\"%s\",\"build_s\":%.3f,\"import_s\":%.3f", gpt_weights_layout_name(layout), build_s, import_s);
  if (!logits_path.empty()) {
    std::vector<int64_t> ids(64);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
    NoGradGuard no_grad;
    const Tensor logits = model.forward(Indices(Shape{1, 64}, ids)).value().contiguous();
    std::ofstream out(logits_path, std::ios::binary);
    out.write(static_cast<const char*>(logits.raw_data()), static_cast<std::streamsize>(logits.numel() * 4));
  }
  if (gen > 0) {
    double best = 0;
    std::vector<int64_t> tokens;
    for (int64_t r = 0; r < repeats; ++r) {
      GenerateOptions g;
      g.max_new_tokens = gen;
      g.sampling.temperature = 0;
      const Clock::time_point t = Clock::now();
      tokens = generate(model, {0}, g);
      const double s = since(t);
      best = std::max(best, static_cast<double>(gen) / s);
    }
    uint64_t print = 1469598103934665603ull;  // FNV-1a over the token ids
    for (int64_t t : tokens) print = (print ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    std::printf(",\"tokens_per_s\":%.2f,\"fingerprint\":\"%016llx\"", best, static_cast<unsigned long long>(print));
  }
  std::printf("}\n");
  return 0;
}
