// tiny_gpt: a character-level GPT trained on Debian's fortunes, in one file, on the framework
// alone (core/, autograd/, layers/ and the optimizer, schedule and clipping of train/). The
// data, the tokenizer, the model and the training step are all written out here; read it top
// to bottom. It is train_gpt's default run (the "baby" GPT: 4 layers, 4 heads, d_model 128, a
// context of 64 characters, batch 32, AdamW at 3e-3 with a cosine schedule, 1000 steps) without
// any of the program around it: no checkpoints, flags or reports but --steps.
//
//   build/examples/tiny_gpt              # about 3 minutes on two cores
//   build/examples/tiny_gpt --steps 100  # a short run
//
// The windows of a batch, the initial weights and the held-out windows are drawn as train_gpt
// draws them (the same counter-based generator, core/rng.h), so the two runs follow each other
// to the last few digits (test tiny_gpt_follows_train_gpt).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"
#include "attograd/core/rng.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/embedding.h"
#include "attograd/layers/layer_norm.h"
#include "attograd/layers/positional.h"
#include "attograd/layers/sequential.h"
#include "attograd/layers/transformer.h"
#include "attograd/train/clip.h"
#include "attograd/train/optim.h"
#include "attograd/train/schedule.h"

using namespace ag;
__extension__ using Uint128 = unsigned __int128;  // for the exact product of two 64-bit numbers

// ---- The text: every fortune file, sorted by name, its "%" separator lines left out. -----------
std::string read_fortunes() {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator("/usr/share/games/fortunes")) {
    const std::string name = e.path().filename().string();
    // The *.u8 names are links to the plain files, and *.dat files are strfile's binary indexes.
    if (fs::is_regular_file(e.symlink_status()) && !name.ends_with(".dat")) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::string text;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0) text += '\n';
    std::ifstream in(files[i], std::ios::binary);
    for (std::string line; std::getline(in, line);) {
      if (line != "%") text += line + (in.eof() ? "" : "\n");
    }
  }
  return text;
}

// ---- The tokenizer: one id per distinct UTF-8 character, sorted by their bytes. ----------------
std::vector<std::string> characters_of(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    const size_t n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

// ---- The batches: windows of block + 1 tokens, the targets being the inputs shifted by one. ----
struct Batch {
  Indices inputs, targets;
};

Batch windows_at(const std::vector<int64_t>& tokens, const std::vector<uint64_t>& starts, int64_t block) {
  const int64_t rows = static_cast<int64_t>(starts.size());
  std::vector<int64_t> in, out;
  for (const uint64_t s : starts) {
    in.insert(in.end(), tokens.begin() + static_cast<int64_t>(s), tokens.begin() + static_cast<int64_t>(s) + block);
    out.insert(out.end(), tokens.begin() + static_cast<int64_t>(s) + 1, tokens.begin() + static_cast<int64_t>(s) + block + 1);
  }
  return {Indices(Shape{rows, block}, in), Indices(Shape{rows, block}, out)};
}

// Step `step`'s windows start at uniform positions drawn as a pure function of (seed, step, row).
Batch training_batch(const std::vector<int64_t>& tokens, int64_t rows, int64_t block, uint64_t seed, int64_t step) {
  Generator gen(seed);
  gen.set_state({.seed = seed, .step = static_cast<uint64_t>(step), .call = uint64_t{1} << 62});
  const uint64_t key = gen.next_stream(), range = tokens.size() - static_cast<uint64_t>(block);
  std::vector<uint64_t> starts;
  for (int64_t r = 0; r < rows; ++r) {
    starts.push_back(static_cast<uint64_t>((static_cast<Uint128>(Generator::bits(key, static_cast<uint64_t>(r))) * range) >> 64));
  }
  return windows_at(tokens, starts, block);
}

// ---- The model: token and position embeddings, pre-norm blocks, a final norm, the head tied to
// the token table (logits = h E^T). ------------------------------------------------------------
struct TinyGPT : Module {
  int64_t block;
  Embedding& embed;
  LearnedPositionalEmbedding& pos;
  Dropout& dropout;
  ModuleList<TransformerBlock>& blocks;
  LayerNorm& norm;

  TinyGPT(int64_t vocab, int64_t block_size, int64_t d, int64_t heads, int64_t layers)
      : block(block_size),
        embed(register_module("embed", std::make_unique<Embedding>(vocab, d))),
        pos(register_module("pos", std::make_unique<LearnedPositionalEmbedding>(block_size, d))),
        dropout(register_module("dropout", std::make_unique<Dropout>(0.0))),
        blocks(register_module("blocks", std::make_unique<ModuleList<TransformerBlock>>())),
        norm(register_module("norm", std::make_unique<LayerNorm>(d))) {
    TransformerBlockOptions b;
    b.d_model = d, b.n_head = heads, b.d_ff = 4 * d, b.dropout = b.attn_dropout = 0.0, b.norm_first = true;
    b.activation = Activation::gelu;  // the exact GELU (GPT-2 itself uses its tanh approximation)
    for (int64_t i = 0; i < layers; ++i) blocks.push_back(std::make_unique<TransformerBlock>(b));
    // nanoGPT's initialisation: N(0, 0.02), the projections into the residual stream scaled by
    // 1 / sqrt(2 layers), zero biases.
    const double residual = 0.02 / std::sqrt(2.0 * static_cast<double>(layers));
    init(embed.weight(), 0.02);
    init(pos.weight(), 0.02);
    for (TransformerBlock* t : blocks) {
      for (Linear* l : {&t->attn().w_q(), &t->attn().w_k(), &t->attn().w_v()}) init(*l, 0.02);
      init(t->attn().w_o(), residual);
      init(t->ff_as<PositionwiseFeedForward>().linear1(), 0.02);
      init(t->ff_as<PositionwiseFeedForward>().linear2(), residual);
    }
  }
  static void init(Variable p, double std) {
    Tensor& v = p.mutable_value();
    const uint64_t key = default_generator().next_stream();
    for (int64_t i = 0; i < v.numel(); ++i) v.data<float>()[i] = static_cast<float>(0.0 + std * Generator::normal(key, static_cast<uint64_t>(i)));
  }
  static void init(Linear& l, double std) {
    init(l.weight(), std);
    Variable bias = l.bias();
    bias.mutable_value().fill_(0.0);
  }
  std::string name() const override { return "TinyGPT"; }

  // The mean cross-entropy of predicting each target from the inputs up to it.
  Variable loss(const Batch& b) {
    const int64_t t = b.inputs.shape[1];
    Variable h = dropout(embed(b.inputs) + narrow(pos.weight(), 0, 0, t));
    const AttentionMask causal = AttentionMask::causal(t);
    for (TransformerBlock* block_i : blocks) h = block_i->forward(h, causal);
    const int64_t vocab = embed.weight().shape()[0];
    return linear_cross_entropy(norm(h), embed.weight(), b.targets, {.chunk_rows = linear_cross_entropy_chunk(vocab)});
  }
};

int main(int argc, char** argv) {
  int64_t steps = 1000;
  if (argc == 3 && std::strcmp(argv[1], "--steps") == 0) steps = std::atoll(argv[2]);
  if (!(argc == 1 || (argc == 3 && steps >= 1 && steps <= 1000000))) {
    std::cerr << "usage: tiny_gpt [--steps N]   (N in [1, 1000000]; 1000 unless given)\n";
    return 2;
  }
  const int64_t batch = 32, block = 64, eval_every = 100;
  const uint64_t seed = 0;

  const std::string text = read_fortunes();
  const std::vector<std::string> chars = characters_of(text);
  const std::set<std::string> distinct(chars.begin(), chars.end());
  const std::vector<std::string> symbols(distinct.begin(), distinct.end());
  std::map<std::string, int64_t> id_of;
  for (const std::string& s : symbols) id_of.emplace(s, static_cast<int64_t>(id_of.size()));
  std::vector<int64_t> tokens;
  for (const std::string& c : chars) tokens.push_back(id_of.at(c));
  // The first 90% of the tokens train, the rest validate.
  const size_t cut = static_cast<size_t>(std::floor(static_cast<double>(tokens.size()) * 0.9));
  const std::vector<int64_t> train(tokens.begin(), tokens.begin() + static_cast<int64_t>(cut));
  const std::vector<int64_t> val(tokens.begin() + static_cast<int64_t>(cut), tokens.end());
  // 64 held-out windows at evenly spaced starts, the first at 0 and the last at the end.
  std::vector<Batch> held_out;
  const uint64_t last_start = val.size() - static_cast<uint64_t>(block) - 1;
  for (uint64_t first = 0; first < 64; first += batch) {
    std::vector<uint64_t> starts;
    for (uint64_t i = first; i < first + batch; ++i) starts.push_back(static_cast<uint64_t>(static_cast<Uint128>(i) * last_start / 63));
    held_out.push_back(windows_at(val, starts, block));
  }
  std::cout << "data   fortunes: " << text.size() << " bytes, " << tokens.size() << " characters, " << symbols.size()
            << " distinct\n";

  manual_seed(seed);
  TinyGPT model(static_cast<int64_t>(symbols.size()), block, 128, 4, 4);
  // AdamW (beta2 0.99, weight decay 0.1 on the matrices only: not on biases, norms and tables).
  const NamedVariables params = model.named_parameters();
  std::vector<std::string> no_decay;
  for (const auto& [name, p] : params) {
    if (p.dim() < 2 || name == "embed.weight" || name == "pos.weight") no_decay.push_back(name);
  }
  AdamW optimizer(params, {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1, .no_decay = no_decay});
  // A linear warm-up of 50 steps (a tenth of a shorter run), then a cosine decay to 3e-4.
  const LrSchedule schedule({.lr = 3e-3, .min_lr = 3e-4, .warmup_steps = std::min<int64_t>(50, steps / 10),
                             .total_steps = steps, .decay = LrDecay::cosine});
  std::cout << "model  " << model.num_parameters() << " parameters\n";

  const auto validation_loss = [&] {
    NoGradGuard no_grad;
    model.eval();
    double sum = 0;
    for (const Batch& b : held_out) sum += model.loss(b).item();
    model.train();
    return sum / static_cast<double>(held_out.size());
  };
  double window = 0;
  for (int64_t step = 0; step < steps; ++step) {
    // One update, as llm.c writes it: forward, zero the gradients, backward, clip, step.
    default_generator().set_step(static_cast<uint64_t>(step + 1));  // dropout's stream, were it on
    const Variable loss = model.loss(training_batch(train, batch, block, seed, step));
    optimizer.zero_grad();
    loss.backward();
    clip_grad_norm(params, 1.0);
    optimizer.set_lr(schedule.at(step));
    optimizer.step();
    window += loss.item();
    if ((step + 1) % eval_every == 0 || step + 1 == steps) {
      const int64_t n = (step + 1) % eval_every == 0 ? eval_every : (step + 1) % eval_every;
      std::printf("step %5lld | train loss %.4f | validation loss %.4f\n", static_cast<long long>(step + 1),
                  window / static_cast<double>(n), validation_loss());
      std::fflush(stdout);
      window = 0;
    }
  }
  return 0;
}
