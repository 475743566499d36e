// The GPT of models/gpt/gpt.h against its nanoGPT-style PyTorch twin (tests/parity/torch_gpt.py):
// module "GPT" compares the logits for input.ids and every parameter's gradient (the tied
// table's is the sum of its uses as embedding and head); module "GPTTrainingRun" trains the GPT
// with AdamW on the stored next-token batches and compares the loss at every step.
#include <stdexcept>

#include "attograd/autograd/nn_ops.h"
#include "attograd/models/gpt/gpt.h"
#include "attograd/train/optim.h"
#include "modules.h"

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
  const std::string activation = c.string("activation", activation_name(o.activation));
  if (activation != "gelu" && activation != "gelu_tanh") f.fail(where + "activation '" + activation + "' is neither gelu nor gelu_tanh");
  o.activation = parse_activation(activation);
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
  auto model = build_gpt(f, f.config().object("model"), "config.model.");
  // named_parameters() lists the tied table once, as PyTorch's parameters() does: one update.
  return run_golden_adamw(f, model->named_parameters(), [&](const Indices& ids) { return model->forward(ids); },
                          CrossEntropyOptions{});
}

}  // namespace ag::parity
