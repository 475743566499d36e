// A layer written outside attograd, against its installed public headers only:
//   1. rms_norm: a new differentiable op, forward and hand-written backward side by side;
//   2. RMSNorm, a Module around the op, and ResidualMLP, a pre-norm block built from it;
//   3. check_layer on both: gradients in f64, accumulation, state_dict, train/eval, seeding;
//   4. a few hundred training steps of a tiny model on the copy task, printing the loss;
//   5. the same RMSNorm as the norms of the library's own TransformerBlock, checked there.
// Exit status 0 when every check passed and the loss fell; docs/extending.md walks through it.
#include <attograd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace custom {

using namespace ag;

// ---- 1. the op ----
// RMS normalisation (Zhang & Sennrich, 2019) over the last axis, with a learned gain:
//   x: (..., C), weight: (C) -> y: (..., C)
//   rstd = 1 / sqrt(mean(x^2 over C) + eps)      (..., 1)
//   y    = x * rstd * weight                      weight broadcast over the leading axes
// Backward reads x_hat = x * rstd, rstd and weight, so forward saves exactly those:
//   dx      = rstd * (g w - x_hat * mean(g w x_hat over C))
//   dweight = sum over the leading axes of g * x_hat
// x may be any strided view: the kernels read it in place and return contiguous results.
// The library has its own fused ag::rms_norm (autograd/nn_ops.h) for its Llama family; this one
// shows how such an op is added from outside. Calls name it custom::rms_norm: with arguments of
// ag's types, unqualified lookup would also find ag::rms_norm and the call would be ambiguous.
Variable rms_norm(const Variable& x, const Variable& weight, double eps) {
  if (weight.dim() != 1 || x.dim() < 1 || x.shape()[-1] != weight.shape()[0] || x.dtype() != weight.dtype()) {
    throw std::invalid_argument("rms_norm: x " + x.shape().str() + " " + dtype_name(x.dtype()) + " must end in " +
                                "weight's size, and weight " + weight.shape().str() + " " +
                                dtype_name(weight.dtype()) + " must be one-dimensional with x's dtype");
  }
  const Tensor& xv = x.value();
  const Tensor rstd = kernels::pow_scalar(kernels::affine(kernels::mean(kernels::mul(xv, xv), {-1}, true), 1.0, eps),
                                          -0.5);                   // (..., 1)
  const Tensor x_hat = kernels::mul(xv, rstd);                     // (..., C)
  Tensor y = kernels::mul(x_hat, weight.value());                  // (..., C)
  const Tensor w = weight.value();
  return make_result("rms_norm", std::move(y), {x, weight}, [x_hat, rstd, w](const Tensor& g, GradSink& grads) {
    if (grads.wants(0)) {
      const Tensor gw = kernels::mul(g, w);
      const Tensor along = kernels::mean(kernels::mul(gw, x_hat), {-1}, true);  // (..., 1)
      grads.add(0, kernels::mul(rstd, kernels::sub(gw, kernels::mul(x_hat, along))));
    }
    // The weight was broadcast over the leading axes, so its gradient sums over them. add()
    // accumulates into whatever gradient is already there: a backward never assigns.
    if (grads.wants(1)) grads.add(1, kernels::sum_to(kernels::mul(g, x_hat), w.shape()));
  });
}

// ---- 2. the layers ----
struct RMSNormOptions {
  int64_t features = 0;
  double eps = 1e-6;
};

// x: (..., features) -> same shape; parameter `weight` (features), initialised to ones.
// A Sublayer (a Module whose one-in, one-out forward is virtual, and whose operator() checks
// that the shape is kept), so that the library's transformer blocks can hold it (part 5).
class RMSNorm : public Sublayer {
 public:
  explicit RMSNorm(const RMSNormOptions& options)
      : options_(checked(options)), weight_(register_parameter("weight", ones({options.features}))) {}

  Variable forward(const Variable& x) override {
    require_dtype(x, weight_.dtype(), "input");
    return custom::rms_norm(x, weight_, options_.eps);
  }
  std::string name() const override { return "RMSNorm"; }

 private:
  static const RMSNormOptions& checked(const RMSNormOptions& o) {
    if (o.features <= 0 || !(o.eps > 0.0)) {
      throw std::invalid_argument("RMSNorm: features and eps must be positive, got features=" +
                                  std::to_string(o.features) + " eps=" + std::to_string(o.eps));
    }
    return o;
  }
  RMSNormOptions options_;
  Variable& weight_;
};

struct ResidualMLPOptions {
  int64_t d_model = 0;
  int64_t d_hidden = 0;
  double dropout = 0.1;
};

// Pre-norm residual feed-forward block:  x + dropout(fc2(gelu(fc1(norm(x)))))
//   x: (..., d_model) -> same shape; children norm, fc1, fc2, dropout.
class ResidualMLP : public Module {
 public:
  explicit ResidualMLP(const ResidualMLPOptions& o)
      : norm_(register_module("norm", std::make_unique<RMSNorm>(RMSNormOptions{o.d_model}))),
        fc1_(register_module("fc1", std::make_unique<Linear>(o.d_model, o.d_hidden))),
        fc2_(register_module("fc2", std::make_unique<Linear>(o.d_hidden, o.d_model))),
        dropout_(register_module("dropout", std::make_unique<Dropout>(o.dropout))) {}

  // Dropout follows train()/eval() by itself; nothing else depends on the mode.
  Variable forward(const Variable& x) { return x + dropout_(fc2_(gelu(fc1_(norm_(x))))); }
  Variable operator()(const Variable& x) { return forward(x); }
  std::string name() const override { return "ResidualMLP"; }

 private:
  RMSNorm& norm_;
  Linear& fc1_;
  Linear& fc2_;
  Dropout& dropout_;
};

// ids (B, T) -> logits (B, T, vocab): embed, one residual block, norm, project.
class CopyModel : public Module {
 public:
  CopyModel(int64_t vocab, int64_t d_model)
      : embed_(register_module("embed", std::make_unique<Embedding>(vocab, d_model))),
        block_(register_module("block", std::make_unique<ResidualMLP>(ResidualMLPOptions{d_model, 4 * d_model}))),
        norm_(register_module("norm", std::make_unique<RMSNorm>(RMSNormOptions{d_model}))),
        head_(register_module("head", std::make_unique<Linear>(d_model, vocab))) {}

  Variable forward(const Indices& ids) { return head_(norm_(block_(embed_(ids)))); }
  std::string name() const override { return "CopyModel"; }

 private:
  Embedding& embed_;
  ResidualMLP& block_;
  RMSNorm& norm_;
  Linear& head_;
};

Variable leaf(const Shape& shape, uint64_t seed, const std::string& name) {
  Generator gen(seed);
  return Variable(normal(shape, 0.0, 1.0, gen, DType::f64), true, name);
}

// ---- 3. the checks ----
bool check_layers() {
  bool ok = true;
  const auto show = [&](const LayerCheckReport& r) {
    std::cout << r.table() << "\n";
    ok = ok && r.ok;
  };
  LayerCheckOptions options;
  options.log = nullptr;  // printed by `show` whether it passed or not
  {
    // A (2, 3, 4) input and a transposed view of a (2, 4, 3) one: contiguous and strided.
    RMSNorm norm(RMSNormOptions{4});
    options.make_twin = [] { return std::make_unique<RMSNorm>(RMSNormOptions{4}); };
    Generator gen(3);
    const Variable strided(normal({2, 4, 3}, 0.0, 1.0, gen, DType::f64).transpose(1, 2), true, "x_t");
    const auto forward = [](RMSNorm& m, const std::vector<Variable>& in) { return m(in[0]) * m(in[1]); };
    show(check_layer(norm, forward, {leaf({2, 3, 4}, 2, "x"), strided}, options));
  }
  {
    ResidualMLP block(ResidualMLPOptions{6, 12, 0.1});
    options.make_twin = [] { return std::make_unique<ResidualMLP>(ResidualMLPOptions{6, 12, 0.1}); };
    const auto forward = [](ResidualMLP& m, const std::vector<Variable>& in) { return m(in[0]); };
    show(check_layer(block, forward, {leaf({2, 3, 6}, 4, "x")}, options));
  }
  return ok;
}

// ---- 4. training ----
// The copy task: 32 rows of 8 random tokens below 16, to be given back as they are. Batch
// `index` of a `part` (0 training, 1 held out) is a pure function of (seed, index, part) through
// the counter-based generator: no state carries from one batch to the next.
struct CopyBatch {
  Indices inputs, targets;
};

CopyBatch copy_batch(uint64_t seed, uint64_t index, uint64_t part) {
  Generator gen(seed);
  gen.set_state(GeneratorState{seed, index, part});
  const uint64_t key = gen.next_stream();
  std::vector<int64_t> tokens(32 * 8);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(Generator::bits(key, i) % 16);
  return {Indices(Shape{32, 8}, tokens), Indices(Shape{32, 8}, tokens)};
}

bool train_copy_task() {
  const int kSteps = 300;
  manual_seed(0);
  CopyModel model(16, 32);
  AdamW optimizer(model.named_parameters(), AdamWOptions{.lr = 3e-3, .weight_decay = 0.0});
  double first = 0.0, recent = 0.0;
  for (int step = 0; step < kSteps; ++step) {
    default_generator().set_step(static_cast<uint64_t>(step));  // dropout masks follow the step
    const CopyBatch batch = copy_batch(1, static_cast<uint64_t>(step), 0);
    const Variable loss = cross_entropy(model.forward(batch.inputs), batch.targets);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    if (step == 0) first = loss.item();
    if (step >= kSteps - 20) recent += loss.item() / 20.0;
    if (step % 50 == 0 || step == kSteps - 1) {
      std::cout << "step " << std::setw(3) << step << "  loss " << std::fixed << std::setprecision(4) << loss.item()
                << "\n";
    }
  }
  model.eval();
  NoGradGuard no_grad;
  const CopyBatch held_out = copy_batch(kDefaultEvalSeed, 0, 1);
  const SequenceMetrics m = sequence_metrics(model.forward(held_out.inputs).value(), held_out.targets);
  std::cout << "held-out token accuracy " << std::setprecision(3) << m.token_accuracy() << ", loss " << m.loss()
            << " (first training loss " << first << ", last 20 steps " << recent << ")\n";
  return recent < 0.25 * first && m.token_accuracy() > 0.9;
}

// ---- 5. inside the library's block ----
// make_norm puts an RMSNorm in norm1 and norm2 of a library TransformerBlock (pre-norm, as in
// GPT-style models): no copy of the block, and the norms' weights are norm1.weight and
// norm2.weight of its state_dict. check_layer then holds the whole block, attention and
// feed-forward around our op, to the same contract.
bool check_library_block() {
  TransformerBlockOptions o{.d_model = 8, .n_head = 2, .d_ff = 16, .dropout = 0.1, .norm_first = true};
  o.make_norm = [](const TransformerBlockOptions& b) { return std::make_unique<RMSNorm>(RMSNormOptions{b.d_model}); };
  manual_seed(5);
  TransformerBlock block(o);
  const StateDict state = block.state_dict();
  const auto has = [&state](const std::string& key) {
    return std::any_of(state.begin(), state.end(), [&key](const auto& entry) { return entry.first == key; });
  };
  // Our weights under the slots' names, and no LayerNorm bias left behind.
  const bool named = has("norm1.weight") && has("norm2.weight") && !has("norm1.bias") && !has("norm2.bias");
  LayerCheckOptions options;
  options.log = nullptr;
  options.make_twin = [o] { return std::make_unique<TransformerBlock>(o); };
  options.zero_ok = {"w_k.bias"};  // the attention's key bias: softmax cancels its gradient
  const auto forward = [](TransformerBlock& m, const std::vector<Variable>& in) {
    return m(in[0], AttentionMask::causal(3));
  };
  const LayerCheckReport r = check_layer(block, forward, {leaf({2, 3, 8}, 6, "x")}, options);
  const bool ok = r.ok && named;
  std::cout << "RMSNorm as norm1/norm2 of a library " << r.layer << ": " << r.passed() << "/" << r.checked()
            << " checks passed" << (ok ? "" : " - FAILED") << "\n";
  if (!r.ok) std::cout << r.table() << "\n";
  return ok;
}

}  // namespace custom

int main() {
  ag::set_num_threads(1);  // matrices this small gain nothing from more threads
  const bool layers_checked = custom::check_layers();
  const bool block_checked = custom::check_library_block();
  const bool checked = layers_checked && block_checked;
  const bool trained = custom::train_copy_task();
  std::cout << (checked ? "checks passed" : "checks FAILED") << ", "
            << (trained ? "training converged" : "training did NOT converge") << "\n";
  return checked && trained ? 0 : 1;
}
