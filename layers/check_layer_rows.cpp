// check_layer's rows: one LayerChecker member per row of the report, the comparisons they
// make, and the walk over one forward's autograd graph that finds trainable leaves the module
// never registered.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "attograd/core/kernels.h"
#include "attograd/layers/check_layer_internal.h"

namespace ag::check_layer_detail {

namespace {

// Tolerance of "prefill + gradient": the engine adds contributions to a leaf one by one, so the
// sum is the same only up to rounding.
constexpr double kAccumulationTolerance = 1e-9;

std::string sci(double v) {
  std::ostringstream os;
  os << std::setprecision(2) << std::scientific << v;
  return os.str();
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

struct GraphLeaf {
  std::shared_ptr<VariableImpl> leaf;
  std::string consumer;  // the op whose edge reached it first; empty when the forward returned it
};

// Every leaf that requires grad and that y's graph reaches, once each, in the order found. An
// explicit stack rather than recursion: a deep network's graph would overflow the call stack.
std::vector<GraphLeaf> trainable_leaves(const Variable& y) {
  std::vector<GraphLeaf> found;
  if (y.is_leaf()) {
    if (y.requires_grad()) found.push_back({y.impl(), ""});
    return found;
  }
  std::unordered_set<const Node*> seen_nodes{y.grad_fn().get()};
  std::unordered_set<const VariableImpl*> seen_leaves;
  std::vector<const Node*> pending{y.grad_fn().get()};
  while (!pending.empty()) {
    const Node* node = pending.back();
    pending.pop_back();
    for (const Edge& edge : node->edges()) {
      if (edge.node != nullptr) {
        if (seen_nodes.insert(edge.node.get()).second) pending.push_back(edge.node.get());
      } else if (edge.leaf != nullptr && edge.leaf->requires_grad && seen_leaves.insert(edge.leaf.get()).second) {
        found.push_back({edge.leaf, node->name()});
      }
    }
  }
  return found;
}

}  // namespace

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

StateDict snapshot(const Module& m) {
  StateDict out;
  for (const auto& [name, t] : m.state_dict()) out.emplace_back(name, t.clone());
  return out;
}

LayerCheckRow LayerChecker::gradient_row(bool training) {
  LayerCheckRow row{training ? kGradientTrain : kGradientEval, LayerCheckStatus::passed, "", ""};
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
  return settled(kBackwardAdds, problems, "prefill + gradient after one pass, twice the gradient after two, on " +
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
  return settled(kEveryLeaf, problems, detail);
}

// The other rows see only registered parameters and the inputs: a trainable leaf the module
// keeps to itself is neither perturbed by gradcheck nor saved, so without this walk it passes
// them all, and an optimizer built from parameters() would never train it.
LayerCheckRow LayerChecker::registration_row(const std::vector<Variable>& inputs) {
  std::unordered_set<const VariableImpl*> known;
  for (const auto& [name, p] : module_.named_parameters()) known.insert(p.id());
  for (const Variable& x : inputs) known.insert(x.id());
  const std::vector<GraphLeaf> leaves = trainable_leaves(run_forward(module_, true, state(0), inputs));
  std::vector<std::string> problems;
  for (const GraphLeaf& g : leaves) {
    if (known.contains(g.leaf.get())) continue;
    const std::string what = g.leaf->name.empty() ? "an unnamed trainable leaf" : "trainable leaf '" + g.leaf->name + "'";
    const std::string how = g.consumer.empty() ? "returned by the forward" : "consumed by '" + g.consumer + "'";
    problems.push_back(what + " " + g.leaf->value.shape().str() + " " + dtype_name(g.leaf->value.dtype()) + ", " +
                       how + ", is neither a parameter of " + module_.name() +
                       " nor an input: register it with register_parameter");
  }
  return settled(kRegistered, problems,
                 "a train-mode forward reaches " + count_of(leaves.size(), "trainable leaf", "trainable leaves") +
                     ", each a registered parameter or an input");
}

LayerCheckRow LayerChecker::round_trip_row() {
  const char* check = kRoundTrip;
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
  const char* check = kTrainEval;
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
  return settled(kSameSeed, problems, joined(done));
}

}  // namespace ag::check_layer_detail
