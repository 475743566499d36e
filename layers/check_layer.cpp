// check_layer: validates the arguments, keeps what the check changes (a Restorer puts the
// module, the inputs' gradients and the generator back as they were, on return and on exception
// alike) and runs the rows of check_layer_rows.cpp in the report's order.
#include "attograd/layers/check_layer.h"

#include <algorithm>
#include <exception>
#include <typeinfo>
#include <utility>

#include "attograd/autograd/grad_mode.h"
#include "attograd/layers/check_layer_internal.h"

namespace ag {

namespace check_layer_detail {

namespace {

// `pattern` names the parameter exactly or is a suffix after a dot ("w_k.bias").
bool name_matches(const std::string& param, const std::string& pattern) {
  if (param == pattern) return true;
  return param.size() > pattern.size() && param.ends_with(pattern) &&
         param[param.size() - pattern.size() - 1] == '.';
}

// Whether the module or one of its descendants draws random numbers in training: each module
// says so for its own forward, so a user's layer needs no entry in a list kept here.
bool applies_dropout(const Module& root) {
  std::vector<const Module*> pending{&root};
  while (!pending.empty()) {
    const Module* m = pending.back();
    pending.pop_back();
    if (m->draws_random_numbers_in_training()) return true;
    for (const auto& [name, child] : m->named_children()) pending.push_back(child);
  }
  return false;
}

// Puts back what the check changes. Its calls cannot throw for a snapshot the same module
// produced (same names, same shapes), which is what a destructor needs.
class Restorer {
 public:
  Restorer(Module& module, const std::vector<Variable>& leaves)
      : module_(module), state_(snapshot(module)), training_(module.is_training()), rng_(default_generator().state()) {
    if (!state_.empty()) dtype_ = state_.front().second.dtype();
    for (const Variable& v : leaves) grads_.emplace_back(v, v.grad());
  }
  ~Restorer() {
    if (dtype_) module_.to(*dtype_);
    module_.load_state_dict(state_);
    module_.train(training_);
    for (auto& [var, grad] : grads_) {
      var.zero_grad();
      var.set_grad(grad);
    }
    default_generator().set_state(rng_);
  }
  Restorer(const Restorer&) = delete;

 private:
  Module& module_;
  StateDict state_;
  std::optional<DType> dtype_;
  bool training_;
  GeneratorState rng_;
  std::vector<std::pair<Variable, Tensor>> grads_;
};

}  // namespace

Variable LayerChecker::run_forward(Module& m, bool training, const GeneratorState& s,
                                   const std::vector<Variable>& inputs) {
  m.train(training);
  default_generator().set_state(s);
  Variable y = forward_(m, inputs);
  if (!y.defined()) throw std::invalid_argument(where() + "the forward returned an undefined variable");
  return y;
}

Tensor LayerChecker::output(Module& m, bool training, const GeneratorState& s) {
  NoGradGuard no_grad;
  return run_forward(m, training, s).value().clone();
}

std::vector<Tensor> LayerChecker::backward_grads(const Tensor& u, int passes) {
  for (Variable& leaf : leaves_) leaf.zero_grad();
  const Variable y = run_forward(module_, true, state(0));
  for (int p = 0; p < passes; ++p) y.backward(u, /*retain_graph=*/p + 1 < passes);
  std::vector<Tensor> out;
  for (const Variable& leaf : leaves_) out.push_back(leaf.grad().defined() ? leaf.grad().clone() : Tensor());
  return out;
}

std::unique_ptr<Module> LayerChecker::build_twin(uint64_t seed) {
  GeneratorStateGuard keep_generator;
  default_generator().manual_seed(seed);
  std::unique_ptr<Module> twin = opt_.make_twin();
  if (!twin) throw std::logic_error(where() + "make_twin returned a null module");
  const Module& built = *twin;
  if (typeid(built) != typeid(module_)) {
    throw std::logic_error(where() + "make_twin built a " + built.name() + ", not a module of the checked layer's type");
  }
  return twin;
}

std::vector<Variable> LayerChecker::resolve(const std::vector<std::string>& names, const char* option) const {
  std::vector<Variable> out;
  const NamedVariables all = module_.named_parameters();
  for (const std::string& pattern : names) {
    bool found = false;
    for (const auto& [name, p] : all) {
      if (!name_matches(name, pattern)) continue;
      found = true;
      out.push_back(p);
    }
    if (!found) {
      std::vector<std::string> known;
      for (const auto& [name, p] : all) known.push_back(name);
      throw std::invalid_argument(where() + option + " name '" + pattern + "' matches no parameter (parameters: " +
                                  (known.empty() ? "none" : joined(known)) + ")");
    }
  }
  return out;
}

void LayerChecker::setup(const std::vector<Variable>& inputs) {
  if (!forward_) throw std::invalid_argument(where() + "the forward callable is empty");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Variable& x = inputs[i];
    const std::string label = "input " + std::to_string(i);
    if (!x.defined()) throw std::invalid_argument(where() + label + " is undefined");
    if (!x.is_leaf()) {
      throw std::invalid_argument(where() + label + " " + x.shape().str() +
                                  " was made by '" + x.grad_fn()->name() + "'; pass leaves (detach() it)");
    }
    if (x.dtype() == DType::f64) {
      inputs_.push_back(x);
      caller_inputs_.push_back(x);
    } else {
      inputs_.emplace_back(x.value().to(DType::f64), x.requires_grad(), x.name());
    }
    if (x.requires_grad()) {
      leaves_.push_back(inputs_.back());
      labels_.push_back(label + (x.name().empty() ? "" : " '" + x.name() + "'") + " " + x.shape().str());
      unused_.push_back(false);
    }
  }
  const std::vector<Variable> unused = resolve(opt_.unused, "unused");
  zero_ok_ = resolve(opt_.zero_ok, "zero_ok");
  zero_ok_.insert(zero_ok_.end(), unused.begin(), unused.end());
  for (const auto& [name, p] : module_.named_parameters()) {
    if (!p.requires_grad()) continue;  // frozen: the engine never sends it anything
    params_.push_back(p);
    leaves_.push_back(p);
    labels_.push_back("param '" + name + "' " + p.shape().str());
    unused_.push_back(std::any_of(unused.begin(), unused.end(), [&](const Variable& u) { return u.id() == p.id(); }));
  }
  if (leaves_.empty()) {
    throw std::invalid_argument(where() + "nothing to check: no trainable parameter and no input requires grad");
  }
  if (const StateDict own = module_.state_dict(); !own.empty()) own_dtype_ = own.front().second.dtype();
  dropout_ = opt_.dropout.value_or(applies_dropout(module_));
}

// to() converts what is registered and nothing else, so a trainable leaf the module keeps to
// itself stays in the old dtype and the f64 forward stops at a dtype mismatch that does not say
// why. Back in its own dtype (the inputs converted to it) the module's forward runs, and its graph
// shows the leaf.
std::optional<LayerCheckRow> LayerChecker::unregistered_in_own_dtype(const std::vector<Variable>& given) {
  try {
    std::vector<Variable> inputs;
    for (const Variable& x : given) {
      if (!own_dtype_ || x.dtype() == *own_dtype_) {
        inputs.push_back(x);
      } else {
        inputs.emplace_back(x.value().to(*own_dtype_), x.requires_grad(), x.name());
      }
    }
    if (own_dtype_) module_.to(*own_dtype_);
    LayerCheckRow row = registration_row(inputs);
    if (row.status == LayerCheckStatus::failed) return row;
  } catch (const std::exception&) {
    // It fails in its own dtype too: the f64 exception is the one to report.
  }
  return std::nullopt;
}

LayerCheckReport LayerChecker::stopped(LayerCheckRow cause, const std::string& error) {
  cause.detail += "; to(DType::f64) does not convert such a leaf, and the f64 forward threw: " + error;
  for (const char* check : kRowOrder) {
    if (check == cause.check) {
      report_.rows.push_back(cause);
    } else {
      report_.rows.push_back({check, LayerCheckStatus::skipped,
                              std::string("not run: the forward fails in f64 (see '") + kRegistered + "')", ""});
    }
  }
  report_.ok = false;
  return report_;
}

LayerCheckReport LayerChecker::run(const std::vector<Variable>& inputs) {
  setup(inputs);
  std::vector<Variable> restored = caller_inputs_;
  restored.insert(restored.end(), params_.begin(), params_.end());
  const Restorer restorer(module_, restored);
  module_.to(DType::f64);

  report_.layer = module_.name();
  try {
    out_shape_ = output(module_, true, state(0)).shape();
  } catch (const std::exception& e) {
    const std::string error = e.what();
    std::optional<LayerCheckRow> cause = unregistered_in_own_dtype(inputs);
    if (!cause) throw;
    return stopped(std::move(*cause), error);
  }
  Generator gen(opt_.seed + 1);
  const Tensor u = normal(out_shape_, 0.0, 1.0, gen, DType::f64);
  const std::vector<Tensor> fresh = backward_grads(u, 1);

  std::vector<LayerCheckRow>& rows = report_.rows;
  rows.push_back(gradient_row(true));
  if (dropout_) {
    rows.push_back(gradient_row(false));
  } else {
    rows.push_back({kGradientEval, LayerCheckStatus::skipped, "no dropout: eval runs the train graph", ""});
  }
  rows.push_back(accumulation_row(u, fresh));
  rows.push_back(reach_row(fresh));
  rows.push_back(registration_row(inputs_));
  rows.push_back(round_trip_row());
  rows.push_back(train_eval_row());
  rows.push_back(seed_row(u, fresh));
  report_.ok = report_.failed() == 0;
  return report_;
}

}  // namespace check_layer_detail

LayerCheckReport check_layer(Module& module, const LayerForward& forward, const std::vector<Variable>& inputs,
                             const LayerCheckOptions& options) {
  check_layer_detail::LayerChecker checker(module, forward, options);
  LayerCheckReport report = checker.run(inputs);
  if (!report.ok && options.log != nullptr) *options.log << report.table() << std::flush;
  return report;
}

}  // namespace ag
