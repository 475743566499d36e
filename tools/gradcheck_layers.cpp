// gradcheck_layers: check_layer over every built-in layer in the configurations people use,
// scaled down so that the whole table takes seconds. Each row is one layer and configuration:
// the largest gradient error over inputs and parameters, and how many of the contract's checks
// passed (see layers/check_layer.h).
//   gradcheck_layers                 every case
//   gradcheck_layers --layer NAME    the cases of one layer (case-insensitive), e.g. MultiHeadAttention
//   gradcheck_layers --list          the cases, without running them
// Exit status: 0 when every check passed, 1 when one failed, 2 for a bad command line.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "attograd.h"

namespace {

using namespace ag;

constexpr uint64_t kSeed = 2024;  // modules are built after manual_seed(kSeed)

struct Case {
  std::string layer;
  std::string config;
  std::function<LayerCheckReport(LayerCheckOptions)> run;
};

// How to build, call and feed one configuration of layer M.
template <class M>
struct Spec {
  std::function<std::unique_ptr<M>()> make;
  std::function<Variable(M&, const std::vector<Variable>&)> forward;
  std::function<std::vector<Variable>()> inputs;
  std::vector<std::string> zero_ok = {};
};

template <class M>
Case make_case(std::string layer, std::string config, Spec<M> spec) {
  return {std::move(layer), std::move(config), [spec](LayerCheckOptions options) {
            manual_seed(kSeed);
            const std::unique_ptr<M> module = spec.make();
            options.make_twin = spec.make;
            options.zero_ok = spec.zero_ok;
            return check_layer(*module, spec.forward, spec.inputs(), options);
          }};
}

// A seeded f64 leaf that requires grad.
Variable leaf(const Shape& shape, uint64_t seed, const std::string& name) {
  Generator gen(seed);
  return Variable(normal(shape, 0.0, 1.0, gen, DType::f64), true, name);
}

// A leaf whose value is a non-contiguous view: `shape` with its last two axes swapped in memory.
Variable transposed_leaf(Shape shape, uint64_t seed, const std::string& name) {
  std::swap(shape[-1], shape[-2]);
  Generator gen(seed);
  return Variable(normal(shape, 0.0, 1.0, gen, DType::f64).transpose(-1, -2), true, name);
}

// (B, H, T, D) as a permuted view of (B, T, H, D), as MultiHeadAttention hands heads over.
Variable heads_leaf(int64_t B, int64_t H, int64_t T, int64_t D, uint64_t seed, const std::string& name) {
  Generator gen(seed);
  return Variable(normal({B, T, H, D}, 0.0, 1.0, gen, DType::f64).permute({0, 2, 1, 3}), true, name);
}

// Query 1 of every batch element sees no key: the all-masked row of the spec.
AttentionMask keep_with_hidden_row(int64_t Tq, int64_t Tk) {
  Tensor keep = ones({1, 1, Tq, Tk});
  for (int64_t k = 0; k < Tk; ++k) keep.set({0, 0, 1, k}, 0.0);
  for (int64_t q = 0; q < Tq; ++q) keep.set({0, 0, q, (q + 2) % Tk}, 0.0);
  return AttentionMask::keep(keep);
}

template <class M>
Variable unary(M& m, const std::vector<Variable>& in) {
  return m.forward(in[0]);
}

std::vector<Case> basic_cases() {
  std::vector<Case> cases;
  cases.push_back(make_case<Linear>("Linear", "in=4 out=3, bias, x (2, 3, 4)",
                                    {[] { return std::make_unique<Linear>(4, 3); }, unary<Linear>,
                                     [] { return std::vector{leaf({2, 3, 4}, 1, "x")}; }}));
  cases.push_back(make_case<Linear>("Linear", "no bias, transposed x (5, 4)",
                                    {[] { return std::make_unique<Linear>(4, 3, false); }, unary<Linear>,
                                     [] { return std::vector{transposed_leaf({5, 4}, 2, "x")}; }}));
  cases.push_back(make_case<Linear>("Linear", "one vector x (4)",
                                    {[] { return std::make_unique<Linear>(4, 2); }, unary<Linear>,
                                     [] { return std::vector{leaf({4}, 3, "x")}; }}));
  for (int64_t dim : {-1, 1}) {
    cases.push_back(make_case<Softmax>("Softmax", "dim=" + std::to_string(dim) + ", x (2, 3, 4)",
                                       {[dim] { return std::make_unique<Softmax>(dim); }, unary<Softmax>,
                                        [] { return std::vector{leaf({2, 3, 4}, 4, "x")}; }}));
  }
  cases.push_back(make_case<ReLU>("ReLU", "x (2, 3, 4)", {[] { return std::make_unique<ReLU>(); }, unary<ReLU>,
                                                          [] { return std::vector{leaf({2, 3, 4}, 5, "x")}; }}));
  cases.push_back(make_case<GELU>("GELU", "transposed x (3, 4)",
                                  {[] { return std::make_unique<GELU>(); }, unary<GELU>,
                                   [] { return std::vector{transposed_leaf({3, 4}, 6, "x")}; }}));
  for (double p : {0.3, 0.0}) {
    cases.push_back(make_case<Dropout>("Dropout", std::string(p > 0 ? "p=0.3" : "p=0") + ", x (3, 5)",
                                       {[p] { return std::make_unique<Dropout>(p); }, unary<Dropout>,
                                        [] { return std::vector{leaf({3, 5}, 7, "x")}; }}));
  }
  cases.push_back(make_case<LayerNorm>("LayerNorm", "(4), x (2, 3, 4)",
                                       {[] { return std::make_unique<LayerNorm>(4); }, unary<LayerNorm>,
                                        [] { return std::vector{leaf({2, 3, 4}, 8, "x")}; }}));
  cases.push_back(make_case<LayerNorm>("LayerNorm", "(3, 4) over two axes, transposed x",
                                       {[] { return std::make_unique<LayerNorm>(LayerNormOptions{Shape{3, 4}}); },
                                        unary<LayerNorm>,
                                        [] { return std::vector{transposed_leaf({2, 3, 4}, 9, "x")}; }}));
  cases.push_back(make_case<LayerNorm>("LayerNorm", "(4) without affine",
                                       {[] { return std::make_unique<LayerNorm>(4, 1e-5, false); }, unary<LayerNorm>,
                                        [] { return std::vector{leaf({3, 4}, 10, "x")}; }}));
  // Repeated ids accumulate. The padding row is read like any other but, by design (as in
  // PyTorch), never receives a gradient, so the padded case keeps it out of the ids.
  const Indices ids(Shape{2, 3}, {1, 4, 1, 0, 6, 4});
  const Indices ids_without_pad(Shape{2, 3}, {1, 4, 1, 0, 5, 4});
  cases.push_back(make_case<Embedding>("Embedding", "7 x 4, ids (2, 3) with repeats",
                                       {[] { return std::make_unique<Embedding>(7, 4); },
                                        [ids](Embedding& m, const std::vector<Variable>&) { return m.forward(ids); },
                                        [] { return std::vector<Variable>{}; }}));
  cases.push_back(make_case<Embedding>(
      "Embedding", "7 x 4, padding_idx=-1, ids (2, 3) without the padding row",
      {[] { return std::make_unique<Embedding>(7, 4, -1); },
       [ids_without_pad](Embedding& m, const std::vector<Variable>&) { return m.forward(ids_without_pad); },
       [] { return std::vector<Variable>{}; }}));
  cases.push_back(make_case<SinusoidalPositionalEncoding>(
      "SinusoidalPositionalEncoding", "d_model=6 max_len=8, x (2, 5, 6)",
      {[] { return std::make_unique<SinusoidalPositionalEncoding>(6, 8); }, unary<SinusoidalPositionalEncoding>,
       [] { return std::vector{leaf({2, 5, 6}, 11, "x")}; }}));
  cases.push_back(make_case<LearnedPositionalEmbedding>(
      "LearnedPositionalEmbedding", "max_len=6 d_model=4, x (2, 4, 4)",
      {[] { return std::make_unique<LearnedPositionalEmbedding>(6, 4); }, unary<LearnedPositionalEmbedding>,
       [] { return std::vector{leaf({2, 4, 4}, 12, "x")}; }}));
  cases.push_back(make_case<Sequential>(
      "Sequential", "Linear-ReLU-Dropout(0.2)-Linear",
      {[] {
         return std::make_unique<Sequential>(std::make_unique<Linear>(4, 6), std::make_unique<ReLU>(),
                                             std::make_unique<Dropout>(0.2), std::make_unique<Linear>(6, 3));
       },
       unary<Sequential>, [] { return std::vector{leaf({2, 4}, 13, "x")}; }}));
  return cases;
}

std::vector<Case> attention_cases() {
  std::vector<Case> cases;
  using Sdpa = ScaledDotProductAttention;
  const auto sdpa = [](ScaledDotProductAttentionOptions o) { return [o] { return std::make_unique<Sdpa>(o); }; };
  cases.push_back(make_case<Sdpa>(
      "ScaledDotProductAttention", "causal, T=4, d_k=3 d_v=5",
      {sdpa({}),
       [](Sdpa& m, const std::vector<Variable>& in) { return m(in[0], in[1], in[2], AttentionMask::causal(4)).output; },
       [] {
         return std::vector{leaf({2, 2, 4, 3}, 20, "q"), leaf({2, 2, 4, 3}, 21, "k"), leaf({2, 2, 4, 5}, 22, "v")};
       }}));
  cases.push_back(make_case<Sdpa>(
      "ScaledDotProductAttention", "Tq=3 Tk=5, key padding, temperature 2, dropout 0.2",
      {sdpa({.temperature = 2.0, .dropout = 0.2}),
       [](Sdpa& m, const std::vector<Variable>& in) {
         return m(in[0], in[1], in[2], AttentionMask::key_padding({5, 2}, 5)).output;
       },
       [] {
         return std::vector{leaf({2, 2, 3, 4}, 23, "q"), leaf({2, 2, 5, 4}, 24, "k"), leaf({2, 2, 5, 3}, 25, "v")};
       }}));
  cases.push_back(make_case<Sdpa>(
      "ScaledDotProductAttention", "permuted q/k/v views, trained bias (1, 1, 3, 4) broadcast, a hidden row",
      {sdpa({}),
       [](Sdpa& m, const std::vector<Variable>& in) {
         return m(in[0], in[1], in[2], keep_with_hidden_row(3, 4), AttentionBias(in[3])).output;
       },
       [] {
         return std::vector{heads_leaf(2, 2, 3, 4, 26, "q"), heads_leaf(2, 2, 4, 4, 27, "k"),
                            heads_leaf(2, 2, 4, 3, 28, "v"), leaf({1, 1, 3, 4}, 29, "bias")};
       }}));

  using Mha = MultiHeadAttention;
  const auto mha = [](MultiHeadAttentionOptions o) { return [o] { return std::make_unique<Mha>(o); }; };
  const auto self = [](AttentionMask mask) {
    return [mask](Mha& m, const std::vector<Variable>& in) { return m.forward(in[0], mask).output; };
  };
  const std::vector<std::string> key_bias = {"w_k.bias"};  // softmax cancels its gradient
  cases.push_back(make_case<Mha>("MultiHeadAttention", "(a) self, d_model=8 n_head=2, 0/1 keep mask with a hidden row",
                                 {mha({.d_model = 8, .n_head = 2}), self(keep_with_hidden_row(3, 3)),
                                  [] { return std::vector{leaf({2, 3, 8}, 30, "x")}; }, key_bias}));
  cases.push_back(make_case<Mha>("MultiHeadAttention", "(b) causal self, d_model=16 over 8 heads, x (2, 4, 16)",
                                 {mha({.d_model = 16, .n_head = 8}), self(AttentionMask::causal(4)),
                                  [] { return std::vector{leaf({2, 4, 16}, 31, "x")}; }, key_bias}));
  cases.push_back(make_case<Mha>("MultiHeadAttention", "(c) temperature sqrt(d_k)=2, dropout 0.1, no bias",
                                 {mha({.d_model = 8, .n_head = 2, .bias = false, .dropout = 0.1, .temperature = 2.0}),
                                  self({}), [] { return std::vector{leaf({2, 3, 8}, 32, "x")}; }}));
  cases.push_back(make_case<Mha>(
      "MultiHeadAttention", "(d) d_k=3 d_v=5 per head, returning weights",
      {mha({.d_model = 6, .n_head = 2, .d_k = 3, .d_v = 5}),
       [](Mha& m, const std::vector<Variable>& in) {
         AttentionOutput r = m.forward(in[0], {}, {}, /*need_weights=*/true);
         if (r.weights.shape() != Shape{2, 2, 3, 3}) throw std::logic_error("MultiHeadAttention (d): weights missing");
         return r.output;
       },
       [] { return std::vector{leaf({2, 3, 6}, 33, "x")}; }, key_bias}));
  for (bool bias : {true, false}) {
    cases.push_back(make_case<Mha>(
        "MultiHeadAttention",
        std::string("(e) q/k/v dims 4/6/5 -> 8 over 2 heads, key padding, dropout 0.1, ") + (bias ? "bias" : "no bias"),
        {mha({.d_model = 8, .n_head = 2, .q_dim = 4, .k_dim = 6, .v_dim = 5, .bias = bias, .dropout = 0.1}),
         [](Mha& m, const std::vector<Variable>& in) {
           return m.forward(in[0], in[1], in[2], AttentionMask::key_padding({5, 2}, 5)).output;
         },
         [] {
           return std::vector{leaf({2, 3, 4}, 34, "query"), leaf({2, 5, 6}, 35, "key"), leaf({2, 5, 5}, 36, "value")};
         },
         bias ? key_bias : std::vector<std::string>{}}));
  }
  cases.push_back(make_case<Mha>("MultiHeadAttention", "cross, Tq=2 Tk=5, transposed key input",
                                 {mha({.d_model = 4, .n_head = 2}),
                                  [](Mha& m, const std::vector<Variable>& in) {
                                    return m.forward(in[0], in[1], in[1]).output;
                                  },
                                  [] {
                                    return std::vector{leaf({2, 2, 4}, 37, "query"),
                                                       transposed_leaf({2, 5, 4}, 38, "memory")};
                                  },
                                  key_bias}));
  return cases;
}

std::vector<Case> block_cases() {
  std::vector<Case> cases;
  using Ffn = PositionwiseFeedForward;
  for (Activation act : {Activation::relu, Activation::gelu}) {
    const double p = act == Activation::relu ? 0.1 : 0.0;
    const std::string config =
        std::string(activation_name(act)) + ", d_model=4 d_hidden=8, dropout " + (p > 0 ? "0.1" : "0");
    cases.push_back(make_case<Ffn>("PositionwiseFeedForward", config,
                                   {[act, p] { return std::make_unique<Ffn>(4, 8, act, p); }, unary<Ffn>,
                                    [] { return std::vector{leaf({2, 3, 4}, 40, "x")}; }}));
  }
  using Block = TransformerBlock;
  const auto block = [](TransformerBlockOptions o) { return [o] { return std::make_unique<Block>(o); }; };
  const auto masked = [](AttentionMask mask) {
    return [mask](Block& m, const std::vector<Variable>& in) { return m.forward(in[0], mask); };
  };
  const auto x = [] { return std::vector{leaf({2, 3, 8}, 41, "x")}; };
  const std::vector<std::string> key_bias = {"w_k.bias"};
  cases.push_back(make_case<Block>("TransformerBlock", "post-norm, causal, dropout 0.1",
                                   {block({.d_model = 8, .n_head = 2, .d_ff = 16, .dropout = 0.1}),
                                    masked(AttentionMask::causal(3)), x, key_bias}));
  cases.push_back(make_case<Block>(
      "TransformerBlock", "pre-norm, key padding (one empty sequence), gelu, no dropout",
      {block({.d_model = 8, .n_head = 2, .d_ff = 16, .dropout = 0.0, .activation = Activation::gelu,
              .norm_first = true}),
       masked(AttentionMask::key_padding({3, 0}, 3)), x, key_bias}));
  cases.push_back(make_case<Block>("TransformerBlock",
                                   "(c) post-norm, temperature sqrt(d_k)=2, attention dropout 0.1, no attention bias",
                                   {block({.d_model = 8, .n_head = 2, .d_ff = 16, .dropout = 0.0, .attn_dropout = 0.1,
                                           .attn_bias = false, .temperature = 2.0}),
                                    masked({}), x}));
  using Encoder = TransformerEncoder;
  const auto encoder = [](bool norm_first) {
    return [norm_first] {
      return std::make_unique<Encoder>(TransformerEncoderOptions{
          2, {.d_model = 8, .n_head = 2, .d_ff = 16, .dropout = 0.1, .norm_first = norm_first}});
    };
  };
  cases.push_back(make_case<Encoder>("TransformerEncoder", "2 pre-norm blocks + final norm, causal",
                                     {encoder(true),
                                      [](Encoder& m, const std::vector<Variable>& in) {
                                        return m.forward(in[0], AttentionMask::causal(3));
                                      },
                                      x, key_bias}));
  cases.push_back(make_case<Encoder>("TransformerEncoder", "2 post-norm blocks, key padding",
                                     {encoder(false),
                                      [](Encoder& m, const std::vector<Variable>& in) {
                                        return m.forward(in[0], AttentionMask::key_padding({2, 3}, 3));
                                      },
                                      x, key_bias}));
  return cases;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> layer_names(const std::vector<Case>& cases) {
  std::vector<std::string> names;
  for (const Case& c : cases) {
    if (std::find(names.begin(), names.end(), c.layer) == names.end()) names.push_back(c.layer);
  }
  return names;
}

void print_row(const std::string& layer, const std::string& config, const std::string& rest) {
  std::cout << std::left << std::setw(29) << layer << " ";
  if (rest.empty()) std::cout << config << "\n";
  else std::cout << std::setw(80) << config << " " << rest << "\n";
}

std::string sci(double v) {
  std::ostringstream os;
  os << std::setprecision(2) << std::scientific << v;
  return os.str();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Case> all = basic_cases();
  for (const std::vector<Case>& more : {attention_cases(), block_cases()}) {
    all.insert(all.end(), more.begin(), more.end());
  }

  bool list = false;
  std::string only;
  std::string names;
  for (const std::string& n : layer_names(all)) names += (names.empty() ? "" : ", ") + n;
  CLI::App app{"Runs the layer contract check (check_layer: float64 gradient checks of inputs and every\n"
               "parameter, backward adds, state_dict round trip, ...) over every built-in layer.",
               "gradcheck_layers"};
  app.set_version_flag("--version", std::string("attograd ") + ATTOGRAD_VERSION);
  app.add_flag("--list", list, "list the cases without running them");
  app.add_option("--layer", only, "only the cases of this layer (case-insensitive): " + names)
      ->check(CLI::Validator(
          [&](std::string& name) -> std::string {
            for (const Case& c : all) {
              if (lower(c.layer) == lower(name)) return {};
            }
            return "no layer named '" + name + "' (layers: " + names + ")";
          },
          "LAYER"));
  CLI11_PARSE(app, argc, argv);
  std::vector<Case> cases;
  for (const Case& c : all) {
    if (only.empty() || lower(c.layer) == lower(only)) cases.push_back(c);
  }

  if (list) {
    for (const Case& c : cases) print_row(c.layer, c.config, "");
    return 0;
  }
  print_row("layer", "config", "max abs   max rel   checks  result");
  int failed = 0;
  for (const Case& c : cases) {
    LayerCheckOptions options;
    options.log = nullptr;  // a failure's table is printed below its row instead
    const LayerCheckReport r = c.run(options);
    std::ostringstream rest;
    rest << std::left << std::setw(9) << sci(r.max_abs_error) << " " << std::setw(9) << sci(r.max_rel_error) << " "
         << std::setw(7) << (std::to_string(r.passed()) + "/" + std::to_string(r.checked())) << " "
         << (r.ok ? "ok" : "FAILED");
    print_row(c.layer, c.config, rest.str());
    if (!r.ok) {
      ++failed;
      std::cout << r.table();
    }
    std::cout << std::flush;
  }
  std::cout << cases.size() << " cases, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}
