// The GPT of models/gpt.h against its nanoGPT-style PyTorch twin (tests/parity/torch_gpt.py):
// module "GPT" compares the logits for input.ids and every parameter's gradient (the tied
// table's is the sum of its uses as embedding and head); module "GPTTrainingRun" trains the GPT
// with AdamW on the stored next-token batches and compares the loss at every step.
#include <stdexcept>

#include "autograd/nn_ops.h"
#include "examples/parity/modules.h"
#include "models/gpt.h"
#include "train/optim.h"

namespace ag::parity {

namespace {

GPTOptions read_gpt_options(const Fixture& f, const Config& c, const std::string& where) {
  GPTOptions o;
  o.vocab = c.integer("vocab");
  o.block_size = c.integer("block_size");
  o.d_model = c.integer("d_model");
  o.n_head = c.integer("n_head");
  o.n_layers = c.integer("n_layers");
  o.dropout = c.number("dropout", o.dropout);
  o.bias = c.boolean("bias", o.bias);
  f.require_comparable_dropout(o.dropout, where + "dropout");
  return o;
}

std::unique_ptr<GPT> build_gpt(const Fixture& f, const Config& c, const std::string& where) {
  const GPTOptions o = read_gpt_options(f, c, where);
  std::unique_ptr<GPT> m;
  try {
    m = std::make_unique<GPT>(o);
  } catch (const std::invalid_argument& e) {
    f.fail(where.substr(0, where.size() - 1) + " " + c.dump_all() + " is not a valid GPT: " + e.what());
  }
  prepare(*m, f);
  return m;
}

// Step `s` of a (S, B, T) batch stack as (B, T).
Indices batch_of(const Indices& all, int64_t s) {
  const int64_t B = all.shape[1], T = all.shape[2];
  const auto begin = all.data.begin() + s * B * T;
  return Indices(Shape{B, T}, std::vector<int64_t>(begin, begin + B * T));
}

}  // namespace

ModuleRun run_gpt(const Fixture& f) {
  ModuleRun run;
  auto m = build_gpt(f, f.config(), "config.");
  const Indices ids = f.indices("input.ids");
  if (ids.shape.rank() != 2) f.fail("input.ids " + ids.shape.str() + " must be (B, T)");
  run.output = m->forward(ids);  // logits (B, T, vocab)
  run.module = std::move(m);
  return run;
}

std::vector<TensorComparison> run_gpt_training(const Fixture& f) {
  const Config& c = f.config();
  auto model = build_gpt(f, c.object("model"), "config.model.");
  const Config& opt = c.object("optimizer");
  const std::string kind = opt.string("name", "AdamW");
  if (kind != "AdamW") f.fail("config.optimizer.name '" + kind + "' is not supported (AdamW is)");
  AdamWOptions o;
  o.lr = opt.number("lr", o.lr);
  o.beta1 = opt.number("beta1", o.beta1);
  o.beta2 = opt.number("beta2", o.beta2);
  o.eps = opt.number("eps", o.eps);
  o.weight_decay = opt.number("weight_decay", o.weight_decay);
  const int64_t steps = c.integer("steps");

  const Indices ids = f.indices("input.ids");
  const Indices targets = f.indices("input.targets");
  if (ids.shape.rank() != 3 || ids.shape[0] != steps || targets.shape != ids.shape) {
    f.fail("input.ids " + ids.shape.str() + " and input.targets " + targets.shape.str() +
           " must both be (steps=" + std::to_string(steps) + ", B, T)");
  }
  const Tensor expected = f.tensor("expect.loss");
  std::unique_ptr<AdamW> optimizer;
  try {
    // named_parameters() lists the tied table once, as PyTorch's parameters() does: one update.
    optimizer = std::make_unique<AdamW>(model->named_parameters(), o);
  } catch (const std::invalid_argument& e) {
    f.fail(std::string("bad config.optimizer: ") + e.what());
  }
  // The PyTorch loop: loss of the current parameters, then one update.
  Tensor losses = zeros(Shape{steps}, f.dtype());
  for (int64_t s = 0; s < steps; ++s) {
    optimizer->zero_grad();
    const Variable loss = cross_entropy(model->forward(batch_of(ids, s)), batch_of(targets, s));
    losses.set({s}, loss.item());
    loss.backward();
    optimizer->step();
  }
  const Tolerance tolerance = f.dtype() == DType::f32 ? Tolerance{kTrainingLossAtol, 0.0} : tolerance_for(DType::f64);
  return {compare_tensors("loss", losses, expected, tolerance)};
}

}  // namespace ag::parity
