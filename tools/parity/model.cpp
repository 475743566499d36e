// The whole model (train/sequence_model.h) with its cross-entropy loss, and the golden training
// run: the same model trained with AdamW on the batches stored in the fixture.
#include <functional>
#include <stdexcept>

#include "attograd/autograd/nn_ops.h"
#include "attograd/models/toy/sequence_model.h"
#include "attograd/models/toy/sequence_options.h"
#include "attograd/train/optim.h"
#include "modules.h"

namespace ag::parity {

namespace {

// metadata "loss": optional JSON {"ignore_index": int, "label_smoothing": number}; the mean is
// always taken over the targets that are not ignored, as PyTorch's default.
CrossEntropyOptions read_loss_options(const Fixture& f) {
  CrossEntropyOptions o;
  const std::string text = f.metadata("loss", "{}");
  Json json;
  try {
    json = parse_json(text);
  } catch (const JsonError& e) {
    f.fail("metadata loss is not valid JSON (" + std::string(e.what()) + "): " + text);
  }
  const Config c(json, "loss", f.label());
  o.ignore_index = c.integer("ignore_index", o.ignore_index);
  o.label_smoothing = c.number("label_smoothing", o.label_smoothing);
  c.check_all_read();
  return o;
}

std::unique_ptr<SequenceModel> build_model(const Fixture& f, const Config& c) {
  std::unique_ptr<SequenceModel> m;
  try {
    const SequenceModelOptions o = sequence_model_options_from_json(c.dump_all());
    f.require_comparable_dropout(o.dropout, "the model's dropout");
    m = std::make_unique<SequenceModel>(o);
  } catch (const std::invalid_argument& e) {
    f.fail(std::string("bad SequenceModel config: ") + e.what());
  }
  prepare(*m, f);
  return m;
}

}  // namespace

Indices step_of(const Indices& all, int64_t s) {
  std::vector<int64_t> dims(all.shape.dims().begin() + 1, all.shape.dims().end());
  const Shape one(dims);
  const int64_t n = one.numel();
  const auto begin = all.data.begin() + s * n;
  return Indices(one, std::vector<int64_t>(begin, begin + n));
}

ModuleRun run_sequence_model(const Fixture& f) {
  ModuleRun run;
  auto m = build_model(f, f.config());
  const CrossEntropyOptions loss_options = read_loss_options(f);
  const Indices ids = f.indices("input.ids");
  const Indices targets = f.indices("input.targets");
  if (ids.shape.rank() != 2 || targets.shape != ids.shape) {
    f.fail("input.ids " + ids.shape.str() + " and input.targets " + targets.shape.str() + " must both be (B, T)");
  }
  const AttentionMask mask = read_mask(f, ids.shape[0], ids.shape[1], ids.shape[1]);
  const Variable logits = m->forward(ids, mask);
  run.output = cross_entropy(logits, targets, loss_options);
  if (f.has("expect.logits")) run.extras.emplace_back("logits", logits.value());
  run.module = std::move(m);
  return run;
}

std::vector<TensorComparison> run_golden_adamw(const Fixture& f, const NamedVariables& params,
                                               const std::function<Variable(int64_t step)>& loss_at) {
  const Config& c = f.config();
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
  const Tensor expected = f.tensor("expect.loss");
  std::unique_ptr<AdamW> optimizer;
  try {
    optimizer = std::make_unique<AdamW>(params, o);
  } catch (const std::invalid_argument& e) {
    f.fail(std::string("bad config.optimizer: ") + e.what());
  }

  // The PyTorch loop: loss of the current parameters, then one update; expect.loss[s] is the
  // loss before update s.
  Tensor losses = zeros(Shape{steps}, f.dtype());
  for (int64_t s = 0; s < steps; ++s) {
    optimizer->zero_grad();
    const Variable loss = loss_at(s);
    losses.set({s}, loss.item());
    loss.backward();
    optimizer->step();
  }
  const Tolerance tolerance = f.dtype() == DType::f32 ? Tolerance{kTrainingLossAtol, 0.0} : tolerance_for(DType::f64);
  return {compare_tensors("loss", losses, expected, tolerance)};
}

std::vector<TensorComparison> run_golden_adamw(const Fixture& f, const NamedVariables& params,
                                               const std::function<Variable(const Indices&)>& logits,
                                               const CrossEntropyOptions& loss_options) {
  const int64_t steps = f.config().integer("steps");
  const Indices ids = f.indices("input.ids");
  const Indices targets = f.indices("input.targets");
  if (ids.shape.rank() != 3 || ids.shape[0] != steps || targets.shape != ids.shape) {
    f.fail("input.ids " + ids.shape.str() + " and input.targets " + targets.shape.str() +
           " must both be (steps=" + std::to_string(steps) + ", B, T)");
  }
  return run_golden_adamw(f, params, [&](int64_t s) {
    return cross_entropy(logits(step_of(ids, s)), step_of(targets, s), loss_options);
  });
}

std::vector<TensorComparison> run_training(const Fixture& f) {
  auto model = build_model(f, f.config().object("model"));
  return run_golden_adamw(f, model->named_parameters(), [&](const Indices& ids) { return model->forward(ids); },
                          read_loss_options(f));
}

}  // namespace ag::parity
