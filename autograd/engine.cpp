// The backward engine: an iterative topological sort of the nodes reachable from the roots,
// then one pass in reverse order in which each node turns its output gradient into gradients
// for its inputs. Gradients meet in the nodes (`pending_`) or, for leaves, in `grad` (+=).
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/profiler.h"
#include "attograd/autograd/variable.h"
#include "attograd/core/kernels.h"

namespace ag {

namespace {

void check_finite(const Tensor& g, const Node& node, size_t input) {
  const bool finite = dispatch(g.dtype(), [&]<typename T>(T) {
    const Tensor c = g.contiguous();
    const T* p = c.data<T>();
    for (int64_t i = 0; i < c.numel(); ++i) {
      if (!std::isfinite(p[i])) return false;
    }
    return true;
  });
  if (!finite) {
    throw std::runtime_error("anomaly: backward of '" + node.name() + "' produced a non-finite gradient for input " +
                             std::to_string(input) + " of shape " + g.shape().str());
  }
}

// True when g is the whole of a contiguous storage that nothing else holds: then writing into
// it, or keeping it, cannot be seen by anyone else.
bool sole_owner(const Tensor& g) {
  return g.defined() && g.is_contiguous() && g.storage().use_count() == 1 &&
         g.storage()->bytes() == static_cast<std::size_t>(g.numel()) * dtype_size(g.dtype());
}

}  // namespace

Node::~Node() {
  std::vector<std::shared_ptr<Node>> doomed;
  for (Edge& e : edges_) {
    if (e.node) doomed.push_back(std::move(e.node));
  }
  while (!doomed.empty()) {
    std::shared_ptr<Node> n = std::move(doomed.back());
    doomed.pop_back();
    if (n.use_count() == 1) {  // we hold the last reference: take its children before it dies
      for (Edge& e : n->edges_) {
        if (e.node) doomed.push_back(std::move(e.node));
      }
    }
  }
}

void Node::release() {
  fn_ = nullptr;  // frees everything the closure saved
  edges_.clear();
  edges_.shrink_to_fit();
  pending_ = Tensor();
  released_ = true;
}

bool GradSink::wants(size_t i) const { return i < node_.edges_.size() && node_.edges_[i].active(); }

const Edge& GradSink::checked_edge(size_t i, const Shape& shape, DType dtype, bool defined) const {
  if (i >= node_.edges_.size()) {
    throw std::logic_error("backward of '" + node_.name_ + "': gradient for input " + std::to_string(i) +
                           " but the op has " + std::to_string(node_.edges_.size()) + " inputs");
  }
  const Edge& e = node_.edges_[i];
  if (e.active() && (!defined || shape != e.shape || dtype != e.dtype)) {
    throw std::logic_error("backward of '" + node_.name_ + "': gradient for input " + std::to_string(i) + " has shape " +
                           (defined ? shape.str() + " " + dtype_name(dtype) : std::string("undefined")) +
                           " but the input has shape " + e.shape.str() + " " + dtype_name(e.dtype));
  }
  return e;
}

void GradSink::add(size_t i, const Tensor& g) {
  if (!checked_edge(i, g.defined() ? g.shape() : Shape(), g.dtype(), g.defined()).active()) return;
  accumulate(i, g, /*owned=*/false);
}

void GradSink::add(size_t i, Tensor&& g) {
  if (!checked_edge(i, g.defined() ? g.shape() : Shape(), g.dtype(), g.defined()).active()) return;
  const bool owned = sole_owner(g);
  accumulate(i, std::move(g), owned);
}

void GradSink::add_matmul(size_t i, const Tensor& a, const Tensor& b) {
  const bool ok = a.defined() && b.defined() && a.dim() == 2 && b.dim() == 2 && a.shape()[1] == b.shape()[0] &&
                  a.dtype() == b.dtype();
  if (!ok) {
    throw std::logic_error("backward of '" + node_.name_ + "': add_matmul for input " + std::to_string(i) +
                           " needs a (M, K) and b (K, N) of one dtype, got a=" +
                           (a.defined() ? a.shape().str() : std::string("undefined")) +
                           " b=" + (b.defined() ? b.shape().str() : std::string("undefined")));
  }
  const int64_t m = a.shape()[0], n = b.shape()[1];
  const Shape product{m, n};
  // The product is the gradient reshaped: same elements in row-major order.
  const Shape& target = i < node_.edges_.size() ? node_.edges_[i].shape : product;
  const bool reshapes = target.numel() == m * n;
  if (!checked_edge(i, reshapes ? target : product, a.dtype(), true).active()) return;
  if (Tensor* into = in_place_target(i)) {
    Tensor out = into->view(product);
    kernels::matmul_add_(out, a, b);
    return;
  }
  accumulate(i, kernels::matmul(a, b).view(node_.edges_[i].shape), /*owned=*/true);
}

Tensor* GradSink::in_place_target(size_t i) {
  // In place only into a gradient nobody else sees; under anomaly mode an addition is checked
  // for non-finite values before it is made, so it must exist on its own.
  const Edge& e = node_.edges_[i];
  if (anomaly_enabled()) return nullptr;
  if (e.leaf) return e.leaf->grad.defined() && e.leaf->grad.is_contiguous() ? &e.leaf->grad : nullptr;
  Node& next = *e.node;
  if (!next.pending_.defined()) return nullptr;
  if (next.pending_borrowed_ && sole_owner(next.pending_)) next.pending_borrowed_ = false;
  return !next.pending_borrowed_ && next.pending_.is_contiguous() ? &next.pending_ : nullptr;
}

void GradSink::add_rows(size_t i, const Tensor& rows, const std::vector<int64_t>& at) {
  const Shape target = i < node_.edges_.size() ? node_.edges_[i].shape : Shape();
  const bool ok = rows.defined() && rows.dim() == 2 && rows.shape()[0] == static_cast<int64_t>(at.size()) &&
                  target.rank() >= 1 && target.numel() == target[0] * rows.shape()[1];
  if (!ok) {
    throw std::logic_error("backward of '" + node_.name_ + "': add_rows for input " + std::to_string(i) +
                           " needs rows (R, D) for R row numbers of a gradient (N, D), got rows " +
                           (rows.defined() ? rows.shape().str() : std::string("undefined")) + " for " +
                           std::to_string(at.size()) + " row numbers into " + target.str());
  }
  if (!checked_edge(i, target, rows.dtype(), true).active()) return;
  const int64_t n = target[0], d = rows.shape()[1];
  for (const int64_t r : at) {
    if (r < 0 || r >= n) {
      throw std::logic_error("backward of '" + node_.name_ + "': add_rows to row " + std::to_string(r) +
                             " of a gradient of " + std::to_string(n) + " rows");
    }
  }
  Tensor* into = in_place_target(i);
  Tensor table = into != nullptr ? *into : zeros(target, rows.dtype());
  const Tensor src = rows.contiguous();
  dispatch(src.dtype(), [&]<typename T>(T) {
    T* dst = table.data<T>();
    const T* from = src.data<T>();
    for (size_t r = 0; r < at.size(); ++r) {
      T* row = dst + at[r] * d;
      const T* add = from + static_cast<int64_t>(r) * d;
      for (int64_t j = 0; j < d; ++j) row[j] += add[j];
    }
  });
  if (into == nullptr) accumulate(i, std::move(table), /*owned=*/true);
}

Tensor GradSink::take_gathered(size_t i) {
  if (i >= node_.edges_.size() || node_.edges_[i].node == nullptr) return Tensor();
  Node& next = *node_.edges_[i].node;
  Tensor g = std::move(next.pending_);
  next.pending_ = Tensor();
  const bool borrowed = next.pending_borrowed_;
  next.pending_borrowed_ = false;
  return borrowed && !sole_owner(g) ? g.clone() : g;
}

void GradSink::accumulate(size_t i, Tensor g, bool owned) {
  const Edge& e = node_.edges_[i];
  if (anomaly_enabled()) check_finite(g, node_, i);
  if (e.leaf) {
    Tensor& dst = e.leaf->grad;
    // The leaf owns its gradient: a temporary is taken over, anything else copied.
    if (!dst.defined()) dst = owned ? std::move(g) : g.clone();
    else kernels::add_(dst, g);
    return;
  }
  Node& next = *e.node;
  if (!next.pending_.defined()) {
    next.pending_ = std::move(g);  // borrowed unless owned: copied only if a second gradient arrives
    next.pending_borrowed_ = !owned;
    return;
  }
  // The first gradient's owner may have dropped it by now (the consumer that sent it is done).
  if (next.pending_borrowed_ && sole_owner(next.pending_)) next.pending_borrowed_ = false;
  if (!next.pending_borrowed_) {
    kernels::add_(next.pending_, g);
  } else if (owned) {
    kernels::add_(g, next.pending_);
    next.pending_ = std::move(g);
    next.pending_borrowed_ = false;
  } else {
    next.pending_ = kernels::add(next.pending_, g);
    next.pending_borrowed_ = false;
  }
}

void run_backward(const std::vector<Variable>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                  bool run_hooks) {
  if (roots.size() != grads.size()) throw std::logic_error("backward: one gradient slot per root is needed");
  // Seed the roots.
  // Nodes are held by shared_ptr for the whole pass: releasing a node drops its edges, and
  // with them possibly the last owner of a node still waiting in `order`.
  std::vector<std::shared_ptr<Node>> starts;
  std::vector<std::shared_ptr<VariableImpl>> hooked_roots;  // leaf roots with a grad-ready hook
  for (size_t r = 0; r < roots.size(); ++r) {
    const Variable& root = roots[r];
    if (!root.requires_grad()) {
      throw std::logic_error("backward: the variable" + (root.name().empty() ? "" : " '" + root.name() + "'") +
                             " of shape " + root.shape().str() +
                             " does not require grad (no input of its graph requires grad, or it was made under "
                             "NoGradGuard)");
    }
    Tensor seed = grads[r];
    if (!seed.defined()) {
      if (root.numel() != 1) {
        throw std::logic_error("backward: a gradient is needed for a non-scalar output of shape " + root.shape().str() +
                               "; pass backward(grad) with that shape, or reduce to one element first");
      }
      seed = ones(root.shape(), root.dtype());
    } else if (seed.shape() != root.shape() || seed.dtype() != root.dtype()) {
      throw std::invalid_argument("backward: gradient " + seed.shape().str() + " " + dtype_name(seed.dtype()) +
                                  " does not match the output " + root.shape().str() + " " + dtype_name(root.dtype()));
    }
    if (root.is_leaf()) {
      Tensor& dst = root.impl()->grad;
      if (!dst.defined()) dst = seed.clone();
      else kernels::add_(dst, seed);
      if (run_hooks && root.impl()->grad_ready_hook) hooked_roots.push_back(root.impl());
      continue;
    }
    const std::shared_ptr<Node>& node = root.grad_fn();
    if (node->released()) {
      throw std::logic_error("backward: the graph through '" + node->name() +
                             "' was already freed by an earlier backward(); pass retain_graph=true to the first "
                             "call to go through it twice");
    }
    // Route the seed as if it came from a consumer of the root: reuse the sink's accumulation.
    Edge self;
    self.node = root.grad_fn();
    self.shape = root.shape();
    self.dtype = root.dtype();
    Node seeder("backward", {self}, nullptr);
    GradSink(seeder, retain_graph).add(0, std::move(seed));  // a fresh ones() is owned; the caller's tensor is not
    starts.push_back(node);
  }

  // Iterative depth-first search: post-order, reversed, is a topological order.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<const Node*> seen;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack;
  for (const std::shared_ptr<Node>& s : starts) {
    if (!seen.insert(s.get()).second) continue;
    stack.emplace_back(s, 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->edges().size()) {
        const std::shared_ptr<Node>& child = node->edges()[next++].node;
        if (child == nullptr || seen.count(child.get())) continue;
        if (child->released()) {
          throw std::logic_error("backward: the graph through '" + child->name() +
                                 "' was already freed by an earlier backward(); pass retain_graph=true to the first "
                                 "call to go through it twice");
        }
        seen.insert(child.get());
        stack.emplace_back(child, 0);
      } else {
        order.push_back(std::move(node));
        stack.pop_back();
      }
    }
  }

  // Leaves with a grad-ready hook: how many edges of this pass still lead to each. A leaf's
  // gradient is final when the last node holding such an edge has run (or had nothing to send).
  std::unordered_map<VariableImpl*, int64_t> unfinished;
  for (const std::shared_ptr<Node>& n : order) {
    for (const Edge& e : n->edges()) {
      if (run_hooks && e.leaf && e.leaf->grad_ready_hook) ++unfinished[e.leaf.get()];
    }
  }
  std::vector<std::shared_ptr<VariableImpl>> ready;
  // A leaf root is final once seeded, unless another root's graph also reaches it.
  for (const std::shared_ptr<VariableImpl>& leaf : hooked_roots) {
    if (!unfinished.count(leaf.get())) leaf->grad_ready_hook(Variable::from_impl(leaf));
  }

  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node& node = **it;
    if (!unfinished.empty()) {
      // Collected before the node runs: release() drops its edges.
      for (const Edge& e : node.edges_) {
        if (e.leaf && e.leaf->grad_ready_hook && --unfinished[e.leaf.get()] == 0) ready.push_back(e.leaf);
      }
    }
    Tensor g = std::move(node.pending_);
    node.pending_ = Tensor();
    node.pending_borrowed_ = false;
    if (g.defined()) {
      GradSink sink(node, retain_graph);
      try {
        if (Profiler* profiler = profiling::active()) {
          const auto start = std::chrono::steady_clock::now();
          node.fn_(g, sink);
          profiler->add(node.name() + " backward",
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        } else {
          node.fn_(g, sink);
        }
      } catch (const OutOfMemory& e) {
        // The allocation knows its shape and bytes; the engine knows whose backward it was.
        throw OutOfMemory(node.name() + " backward (gradient " + g.shape().str() + "): " + e.what());
      }
    }
    if (!retain_graph) node.release();
    for (const std::shared_ptr<VariableImpl>& leaf : ready) leaf->grad_ready_hook(Variable::from_impl(leaf));
    ready.clear();
  }
  profiling::restart_clock();
}

}  // namespace ag
