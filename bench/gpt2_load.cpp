// Times GPT-2 (a preset of models/gpt/gpt.h) coming in from a weights file, and optionally its cached
// generation: bench/compare_gpt2.sh runs it under /usr/bin/time -v beside bench/torch_gpt2.py.
//
//   build/bench/gpt2_load --weights /tmp/gpt2-bench/model.safetensors           build + import
//   build/bench/gpt2_load --weights FILE --generate 100 --repeats 3 [--threads 2] [--logits out.bin]
//   build/bench/gpt2_load --weights FILE --quantize q4_0 --generate 100          the same, q4_0 weights
//   build/bench/gpt2_load --weights FILE --quality int8 --generate 100           int8 against float32
//
// Prints one JSON line: the layout, the seconds to build the model and to read the file into it,
// and with --generate the greedy tokens/s at batch 1 with the KV cache (best of the repeats; the
// first token is the prompt's, the rest one position each) and a fingerprint of the tokens.
// --logits writes the float32 logits of ids 0..T-1 (T = 64) for a parity check against PyTorch.
// --quantize int8|q4_0 runs GPT::quantize after the import (its seconds are quantize_s), so the
// logits and the generation are the quantized model's. --quality FORMAT measures what the
// format costs in one process: the logits of ids 0..63 and the --generate greedy tokens of the float32 model,
// then of the same model quantized: the largest logit difference against the logits' largest
// magnitude, the positions whose argmax agrees, and how many generated tokens agree (the common
// prefix, and position by position).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <iostream>
#include <string>
#include <vector>

#include "../tools/common/threads_flag.h"
#include "attograd/autograd/grad_mode.h"
#include "attograd/core/skip_init.h"
#include "attograd/core/threads.h"
#include "attograd/models/gpt/generate.h"
#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "guarded_main.h"

namespace {

using namespace ag;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The float32 logits of ids 0..63, (1, 64, vocab).
Tensor logits_of_the_first_ids(GPT& model) {
  std::vector<int64_t> ids(64);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  NoGradGuard no_grad;
  return model.forward(Indices(Shape{1, 64}, ids)).value().contiguous();
}

std::vector<int64_t> greedy_tokens(GPT& model, int64_t n) {
  GenerateOptions g;
  g.max_new_tokens = n;
  g.sampling.temperature = 0;
  return generate(model, {0}, g);
}

// The bytes a cached token reads, on average over generating `gen` tokens after a prompt of
// one: every Linear's weight as it is held (float32 or its quantized copy) and bias, the norms,
// the head's table (float32 or quantized: the formula of core/quantize.h), and the cached keys
// and values of the positions before it. The embedding rows a token looks up are left out (two
// rows of 768 floats).
double bytes_per_token(GPT& model, int64_t gen) {
  double bytes = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    if (name == "embed.weight" || name == "pos.weight") continue;
    bytes += static_cast<double>(p.numel() * dtype_size(p.dtype()));
  }
  for (auto& [path, module] : model.named_modules()) {
    if (auto* l = dynamic_cast<Linear*>(module); l && l->is_quantized()) {
      bytes += static_cast<double>(l->quantized_weight().bytes() - l->weight().numel() * 4);
    }
  }
  const GPTOptions& o = model.options();
  const double blocks = static_cast<double>((o.d_model + kQuantBlock - 1) / kQuantBlock), vocab = static_cast<double>(o.vocab);
  if (!model.is_quantized()) {
    bytes += vocab * static_cast<double>(o.d_model) * 4;
  } else if (model.quantized_format() == WeightFormat::int8) {
    bytes += vocab * (static_cast<double>(o.d_model) + blocks * 4);
  } else {
    bytes += vocab * blocks * static_cast<double>(kQ4BlockBytes);
  }
  const double mean_positions = 1.0 + static_cast<double>(gen) / 2.0;
  return bytes + 2.0 * static_cast<double>(o.n_layers * o.d_model) * 4.0 * mean_positions;
}

// --quality: prints the comparison fields of the JSON line.
void print_quality(GPT& model, WeightFormat format, int64_t gen) {
  const Tensor lf = logits_of_the_first_ids(model);
  const std::vector<int64_t> tf = gen > 0 ? greedy_tokens(model, gen) : std::vector<int64_t>{};
  const Clock::time_point t = Clock::now();
  model.quantize(format);
  const double quantize_s = since(t);
  const Tensor lq = logits_of_the_first_ids(model);
  const std::vector<int64_t> tq = gen > 0 ? greedy_tokens(model, gen) : std::vector<int64_t>{};
  const float* a = lf.data<float>();
  const float* b = lq.data<float>();
  const int64_t vocab = lf.shape()[2];
  double diff = 0, scale = 0;
  int64_t argmax_agree = 0;
  for (int64_t r = 0; r < 64; ++r) {
    int64_t ia = 0, ib = 0;
    for (int64_t j = 0; j < vocab; ++j) {
      const int64_t i = r * vocab + j;
      diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
      if (a[i] > a[r * vocab + ia]) ia = j;
      if (b[i] > b[r * vocab + ib]) ib = j;
    }
    argmax_agree += ia == ib;
  }
  size_t prefix = 0, equal = 0;
  while (prefix < tf.size() && tf[prefix] == tq[prefix]) ++prefix;
  for (size_t i = 0; i < tf.size(); ++i) equal += tf[i] == tq[i];
  std::printf(",\"format\":\"%s\",\"quantize_s\":%.3f,\"logits_max_diff\":%.4g,\"logits_scale\":%.4g,\"logits_relative\":%.4g,"
              "\"argmax_agree\":\"%lld/64\",\"tokens_common_prefix\":\"%zu/%zu\",\"tokens_equal_at\":\"%zu/%zu\"",
              format_name(format), quantize_s, diff, scale, diff / scale, static_cast<long long>(argmax_agree), prefix, tf.size(), equal, tf.size());
}

}  // namespace

int run_main(int argc, char** argv) {
  std::string weights, preset = "gpt2", threads = "2", logits_path, quantize = "none", quality;
  int64_t gen = 0, repeats = 3;
  bool draw = false;
  CLI::App app{"GPT-2 from a weights file: build and import time, cached greedy generation."};
  app.add_option("--weights", weights, "a file in any layout read_gpt_weights reads")->required();
  app.add_option("--preset", preset, "the model's shape");
  app.add_option("--generate", gen, "tokens to generate greedily (0: none)");
  app.add_option("--repeats", repeats, "timed generations");
  app.add_option("--logits", logits_path, "write the float32 logits of ids 0..63 here");
  app.add_flag("--draw-init", draw, "draw the initial weights before the import (as a fresh model does)");
  app.add_option("--quantize", quantize, "int8 or q4_0: quantized weights after the import (GPT::quantize)")
      ->check(CLI::IsMember({"none", "int8", "q4_0"}));
  app.add_option("--quality", quality, "int8 or q4_0: that model's logits and greedy tokens against the float32 model's")
      ->check(CLI::IsMember({"int8", "q4_0"}));
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
  if (!quality.empty()) {
    print_quality(model, parse_weight_format(quality), gen);
    std::printf("}\n");
    return 0;
  }
  if (quantize != "none") {
    const Clock::time_point t = Clock::now();
    model.quantize(parse_weight_format(quantize));
    std::printf(",\"quantize_s\":%.3f", since(t));
  }
  if (!logits_path.empty()) {
    const Tensor logits = logits_of_the_first_ids(model);
    std::ofstream out(logits_path, std::ios::binary);
    out.write(static_cast<const char*>(logits.raw_data()), static_cast<std::streamsize>(logits.numel() * 4));
  }
  if (gen > 0) {
    double best = 0;
    std::vector<int64_t> tokens;
    for (int64_t r = 0; r < repeats; ++r) {
      const Clock::time_point t = Clock::now();
      tokens = greedy_tokens(model, gen);
      const double s = since(t);
      best = std::max(best, static_cast<double>(gen) / s);
    }
    uint64_t print = 1469598103934665603ull;  // FNV-1a over the token ids
    for (int64_t t : tokens) print = (print ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    std::printf(",\"tokens_per_s\":%.2f,\"fingerprint\":\"%016llx\",\"bytes_per_token\":%.0f", best,
                static_cast<unsigned long long>(print), bytes_per_token(model, gen));
  }
  std::printf("}\n");
  return 0;
}

int main(int argc, char** argv) {
  return ag::bench::guarded_main("gpt2_load", [&] { return run_main(argc, argv); });
}
