// check_layer: the contract checks of check_layer.h, one member of LayerChecker per row of the
// report. A Restorer puts the module, the inputs' gradients and the generator back as they
// were, on return and on exception alike.
#include "attograd/layers/check_layer.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <typeinfo>
#include <utility>

#include "attograd/autograd/grad_mode.h"
#include "attograd/core/kernels.h"

namespace ag {

namespace {

// Generator states tried when looking for a dropout mask that drops something: with few
// elements and a small rate one mask may keep everything, sixteen in a row almost never do.
constexpr uint64_t kDropoutStates = 16;
// Tolerance of "prefill + gradient": the engine adds contributions to a leaf one by one, so the
// sum is the same only up to rounding.
constexpr double kAccumulationTolerance = 1e-9;

std::string sci(double v) {
  std::ostringstream os;
  os << std::setprecision(2) << std::scientific << v;
  return os.str();
}

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

// Largest |a - b| over elements that are not bit-for-bit equal in value; infinity when the
// shapes differ or a difference is NaN. Zero means identical.
double max_difference(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return std::numeric_limits<double>::infinity();
  if (!a.defined()) return 0.0;
  if (a.shape() != b.shape()) return std::numeric_limits<double>::infinity();
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  double worst = 0.0;
  for (size_t i = 0; i < va.size(); ++i) {
    if (va[i] == vb[i]) continue;
    const double d = std::abs(va[i] - vb[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}

bool all_finite(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Empty when `got` matches `expected` within kAccumulationTolerance; otherwise the first
// element that does not.
std::string accumulation_mismatch(const Tensor& got, const Tensor& expected) {
  if (!got.defined()) return "no gradient at all";
  const std::vector<double> g = got.to_vector(), e = expected.to_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    if (!(std::abs(g[i] - e[i]) <= kAccumulationTolerance * (1.0 + std::abs(e[i])))) {
      std::ostringstream os;
      os << std::setprecision(10) << "flat element " << i << ": expected " << e[i] << ", got " << g[i];
      return os.str();
    }
  }
  return "";
}

// "1 leaf", "3 leaves".
std::string count_of(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string joined(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

// A row that passed with `detail`, or failed with the first few problems found.
LayerCheckRow settled(const char* check, std::vector<std::string> problems, const std::string& detail) {
  if (problems.empty()) return {check, LayerCheckStatus::passed, detail, ""};
  constexpr size_t kShown = 4;
  if (problems.size() > kShown) {
    const size_t more = problems.size() - kShown;
    problems.resize(kShown);
    problems.push_back("and " + std::to_string(more) + " more");
  }
  return {check, LayerCheckStatus::failed, joined(problems, "; "), ""};
}

// Moves every parameter and buffer away from its value, so that a load has to put it back.
void perturb(const Module& m, Generator& gen) {
  for (const auto& [name, t] : m.state_dict()) {
    Tensor target = t;  // shares the module's storage
    target.copy_(kernels::add(t, normal(t.shape(), 0.0, 0.5, gen, t.dtype())));
  }
}

StateDict snapshot(const Module& m) {
  StateDict out;
  for (const auto& [name, t] : m.state_dict()) out.emplace_back(name, t.clone());
  return out;
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

class LayerChecker {
 public:
  LayerChecker(Module& module, const LayerForward& forward, const LayerCheckOptions& options)
      : module_(module), forward_(forward), opt_(options) {}

  LayerCheckReport run(const std::vector<Variable>& inputs);

 private:
  GeneratorState state(uint64_t step) const { return GeneratorState{opt_.seed, step, 0}; }
  std::string where() const { return "check_layer (" + module_.name() + "): "; }
  Variable run_forward(Module& m, bool training, const GeneratorState& s) {
    m.train(training);
    default_generator().set_state(s);
    Variable y = forward_(m, inputs_);
    if (!y.defined()) throw std::invalid_argument(where() + "the forward returned an undefined variable");
    return y;
  }
  // A copy: a forward may return its input (dropout in eval) or a view of it.
  Tensor output(Module& m, bool training, const GeneratorState& s) {
    NoGradGuard no_grad;
    return run_forward(m, training, s).value().clone();
  }
  // Leaf gradients (undefined where none arrived) after `passes` backward passes with
  // cotangent u through one graph built in train mode from cleared gradients.
  std::vector<Tensor> backward_grads(const Tensor& u, int passes) {
    for (Variable& leaf : leaves_) leaf.zero_grad();
    const Variable y = run_forward(module_, true, state(0));
    for (int p = 0; p < passes; ++p) y.backward(u, /*retain_graph=*/p + 1 < passes);
    std::vector<Tensor> out;
    for (const Variable& leaf : leaves_) out.push_back(leaf.grad().defined() ? leaf.grad().clone() : Tensor());
    return out;
  }
  std::unique_ptr<Module> build_twin(uint64_t seed) {
    GeneratorStateGuard keep_generator;
    default_generator().manual_seed(seed);
    std::unique_ptr<Module> twin = opt_.make_twin();
    if (!twin) throw std::logic_error(where() + "make_twin returned a null module");
    const Module& built = *twin;
    if (typeid(built) != typeid(module_)) {
      throw std::logic_error(where() + "make_twin built a " + built.name() +
                             ", not a module of the checked layer's type");
    }
    return twin;
  }

  void setup(const std::vector<Variable>& inputs);
  std::vector<Variable> resolve(const std::vector<std::string>& names, const char* option) const;
  LayerCheckRow gradient_row(bool training);
  LayerCheckRow accumulation_row(const Tensor& u, const std::vector<Tensor>& fresh);
  LayerCheckRow reach_row(const std::vector<Tensor>& fresh) const;
  LayerCheckRow round_trip_row();
  LayerCheckRow train_eval_row();
  LayerCheckRow seed_row(const Tensor& u, const std::vector<Tensor>& fresh);

  Module& module_;
  const LayerForward& forward_;
  const LayerCheckOptions& opt_;
  std::vector<Variable> inputs_;         // f64
  std::vector<Variable> caller_inputs_;  // the f64 inputs used as they are (their grads are restored)
  std::vector<Variable> leaves_;         // inputs that require grad, then trainable parameters
  std::vector<std::string> labels_;      // parallel to leaves_
  std::vector<bool> unused_;             // parallel to leaves_
  std::vector<Variable> params_;
  std::vector<Variable> zero_ok_;        // zero_ok and unused parameters, for gradcheck
  bool dropout_ = false;
  Shape out_shape_;
  LayerCheckReport report_;
};

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
  dropout_ = opt_.dropout.value_or(applies_dropout(module_));
}

LayerCheckReport LayerChecker::run(const std::vector<Variable>& inputs) {
  setup(inputs);
  std::vector<Variable> restored = caller_inputs_;
  restored.insert(restored.end(), params_.begin(), params_.end());
  const Restorer restorer(module_, restored);
  module_.to(DType::f64);

  report_.layer = module_.name();
  out_shape_ = output(module_, true, state(0)).shape();
  Generator gen(opt_.seed + 1);
  const Tensor u = normal(out_shape_, 0.0, 1.0, gen, DType::f64);
  const std::vector<Tensor> fresh = backward_grads(u, 1);

  std::vector<LayerCheckRow>& rows = report_.rows;
  rows.push_back(gradient_row(true));
  if (dropout_) {
    rows.push_back(gradient_row(false));
  } else {
    rows.push_back({"gradient (eval)", LayerCheckStatus::skipped, "no dropout: eval runs the train graph", ""});
  }
  rows.push_back(accumulation_row(u, fresh));
  rows.push_back(reach_row(fresh));
  rows.push_back(round_trip_row());
  rows.push_back(train_eval_row());
  rows.push_back(seed_row(u, fresh));
  report_.ok = report_.failed() == 0;
  return report_;
}

LayerCheckRow LayerChecker::gradient_row(bool training) {
  LayerCheckRow row{training ? "gradient (train)" : "gradient (eval)", LayerCheckStatus::passed, "", ""};
  GradcheckOptions g = opt_.gradcheck;
  g.params = params_;
  g.zero_ok = zero_ok_;
  g.check_accumulation = false;  // a row of its own
  module_.train(training);
  default_generator().set_state(state(0));
  const GradcheckFn fn = [this](const std::vector<Variable>& in) { return forward_(module_, in); };
  const GradcheckResult r = gradcheck(fn, inputs_, g);
  row.detail = "max abs " + sci(r.max_abs_error) + ", max rel " + sci(r.max_rel_error) + " over " +
               std::to_string(r.comparisons) + " comparisons (" +
               (r.full_jacobian ? "full Jacobian" : "random projections") + ")";
  if (!r.ok) {
    row.status = LayerCheckStatus::failed;
    row.report = r.report;
  }
  report_.max_abs_error = std::max(report_.max_abs_error, r.max_abs_error);
  report_.max_rel_error = std::max(report_.max_rel_error, r.max_rel_error);
  report_.comparisons += r.comparisons;
  return row;
}

LayerCheckRow LayerChecker::accumulation_row(const Tensor& u, const std::vector<Tensor>& fresh) {
  std::vector<std::string> problems;
  Generator gen(opt_.seed + 2);
  std::vector<Tensor> prefill;
  for (Variable& leaf : leaves_) {
    prefill.push_back(normal(leaf.shape(), 0.0, 1.0, gen, DType::f64));
    leaf.set_grad(prefill.back().clone());
  }
  run_forward(module_, true, state(0)).backward(u);
  for (size_t j = 0; j < leaves_.size(); ++j) {
    const Tensor expected = fresh[j].defined() ? kernels::add(prefill[j], fresh[j]) : prefill[j];
    const std::string problem = accumulation_mismatch(leaves_[j].grad(), expected);
    if (!problem.empty()) problems.push_back(labels_[j] + ": backward onto a prefilled grad did not add: " + problem);
  }
  const std::vector<Tensor> twice = backward_grads(u, 2);
  for (size_t j = 0; j < leaves_.size(); ++j) {
    if (!fresh[j].defined()) continue;
    const std::string problem = accumulation_mismatch(twice[j], kernels::affine(fresh[j], 2.0, 0.0));
    if (!problem.empty()) problems.push_back(labels_[j] + ": two passes through one graph did not double: " + problem);
  }
  return settled("backward adds", problems, "prefill + gradient after one pass, twice the gradient after two, on " +
                                                count_of(leaves_.size(), "leaf", "leaves"));
}

LayerCheckRow LayerChecker::reach_row(const std::vector<Tensor>& fresh) const {
  std::vector<std::string> missing, unexpected, non_finite, problems;
  size_t unused = 0;
  for (size_t j = 0; j < leaves_.size(); ++j) {
    if (unused_[j]) {
      ++unused;
      if (fresh[j].defined()) unexpected.push_back(labels_[j]);
    } else if (!fresh[j].defined()) {
      missing.push_back(labels_[j]);
    } else if (!all_finite(fresh[j])) {
      non_finite.push_back(labels_[j]);
    }
  }
  if (!missing.empty()) problems.push_back("no gradient reached " + joined(missing) + " (list unused parameters)");
  if (!unexpected.empty()) problems.push_back("listed as unused but got a gradient: " + joined(unexpected));
  if (!non_finite.empty()) problems.push_back("non-finite gradient: " + joined(non_finite));
  std::string detail = count_of(leaves_.size() - unused, "leaf", "leaves") + " got finite gradients";
  if (unused > 0) detail += ", " + count_of(unused, "parameter", "parameters") + " listed as unused got none";
  return settled("every leaf gets a gradient", problems, detail);
}

LayerCheckRow LayerChecker::round_trip_row() {
  const char* check = "state_dict round trip";
  const StateDict saved = snapshot(module_);
  if (saved.empty()) return {check, LayerCheckStatus::skipped, "no parameters or buffers to save", ""};
  const Tensor ref_train = output(module_, true, state(0));
  const Tensor ref_eval = output(module_, false, state(0));
  Generator noise(opt_.seed + 3);
  std::unique_ptr<Module> twin;
  Module* target = &module_;
  std::string how = " loaded back into the perturbed module";
  if (opt_.make_twin) {
    twin = build_twin(opt_.seed + 4);
    twin->to(DType::f64);
    perturb(*twin, noise);
    try {
      twin->load_state_dict(saved);
    } catch (const std::invalid_argument& e) {
      return settled(check, {std::string("the twin built by make_twin does not take the state_dict: ") + e.what()}, "");
    }
    target = twin.get();
    how = " loaded into a perturbed twin";
  } else {
    perturb(module_, noise);
    const double moved = max_difference(output(module_, false, state(0)), ref_eval);
    module_.load_state_dict(saved);
    if (moved == 0.0) {
      return settled(check, {"perturbing every parameter and buffer left the output unchanged"}, "");
    }
  }
  const double d_train = max_difference(output(*target, true, state(0)), ref_train);
  const double d_eval = max_difference(output(*target, false, state(0)), ref_eval);
  how = count_of(saved.size(), "tensor", "tensors") + how;
  if (d_train == 0.0 && d_eval == 0.0) return settled(check, {}, how + ": identical outputs in train and eval");
  return settled(check, {how + ": outputs differ by up to " + sci(d_train) + " (train) and " + sci(d_eval) +
                         " (eval); does the layer keep state outside its parameters and buffers?"}, "");
}

LayerCheckRow LayerChecker::train_eval_row() {
  const char* check = "train/eval";
  const Tensor y_eval = output(module_, false, state(0));
  if (!dropout_) {
    const double d = max_difference(output(module_, true, state(0)), y_eval);
    if (d == 0.0) return settled(check, {}, "no dropout: train and eval outputs identical");
    return settled(check, {"train and eval outputs differ by up to " + sci(d) + " but the module applies no dropout " +
                           "(a mode-dependent branch? if it drops, override draws_random_numbers_in_training() " +
                           "or set options.dropout)"}, "");
  }
  const double eval_moved = max_difference(output(module_, false, state(1)), y_eval);
  if (eval_moved != 0.0) {
    return settled(check, {"in eval the output depends on the random generator (differs by up to " + sci(eval_moved) +
                           "): dropout must be the identity in eval"}, "");
  }
  for (uint64_t step = 0; step < kDropoutStates; ++step) {
    const double d = max_difference(output(module_, true, state(step)), y_eval);
    if (d > 0.0) {
      return settled(check, {}, "dropout: train differs from eval (by up to " + sci(d) + "), eval ignores the RNG");
    }
  }
  return settled(check, {"the module is said to apply dropout, but " + std::to_string(kDropoutStates) +
                         " generator states gave train outputs equal to eval"}, "");
}

LayerCheckRow LayerChecker::seed_row(const Tensor& u, const std::vector<Tensor>& fresh) {
  std::vector<std::string> problems, done;
  const Tensor y = output(module_, true, state(0));
  const double d = max_difference(output(module_, true, state(0)), y);
  if (d != 0.0) problems.push_back("two train passes from one generator state differ by up to " + sci(d));
  const std::vector<Tensor> again = backward_grads(u, 1);
  for (size_t j = 0; j < leaves_.size(); ++j) {
    const double dg = max_difference(again[j], fresh[j]);
    if (dg != 0.0) problems.push_back("gradient of " + labels_[j] + " differs between two passes by up to " + sci(dg));
  }
  done.push_back("same outputs and gradients");
  if (dropout_) {
    bool varied = false;
    for (uint64_t step = 1; step <= kDropoutStates && !varied; ++step) {
      varied = max_difference(output(module_, true, state(step)), y) > 0.0;
    }
    if (!varied) problems.push_back("the dropout mask ignores the generator state");
    done.push_back("another state, another mask");
  }
  if (opt_.make_twin) {
    const std::unique_ptr<Module> a = build_twin(opt_.seed + 5);
    const std::unique_ptr<Module> b = build_twin(opt_.seed + 5);
    const StateDict sa = a->state_dict(), sb = b->state_dict();
    for (size_t i = 0; i < sa.size() && i < sb.size(); ++i) {
      const double dt = max_difference(sa[i].second, sb[i].second);
      if (dt != 0.0) problems.push_back("two twins built after one manual_seed differ in '" + sa[i].first + "'");
    }
    done.push_back("same init");
  }
  return settled("same seed", problems, joined(done));
}

}  // namespace

LayerCheckReport check_layer(Module& module, const LayerForward& forward, const std::vector<Variable>& inputs,
                             const LayerCheckOptions& options) {
  LayerChecker checker(module, forward, options);
  LayerCheckReport report = checker.run(inputs);
  if (!report.ok && options.log != nullptr) *options.log << report.table() << std::flush;
  return report;
}

}  // namespace ag
