// The backward engine: an iterative topological sort of the nodes reachable from the roots,
// then one pass in reverse order in which each node turns its output gradient into gradients
// for its inputs. Gradients meet in the nodes (`pending_`) or, for leaves, in `grad` (+=).
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/profiler.h"
#include "autograd/variable.h"
#include "core/kernels.h"

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

void GradSink::add(size_t i, const Tensor& g) {
  if (i >= node_.edges_.size()) {
    throw std::logic_error("backward of '" + node_.name_ + "': gradient for input " + std::to_string(i) +
                           " but the op has " + std::to_string(node_.edges_.size()) + " inputs");
  }
  const Edge& e = node_.edges_[i];
  if (!e.active()) return;
  if (!g.defined() || g.shape() != e.shape || g.dtype() != e.dtype) {
    throw std::logic_error("backward of '" + node_.name_ + "': gradient for input " + std::to_string(i) + " has shape " +
                           (g.defined() ? g.shape().str() + " " + dtype_name(g.dtype()) : std::string("undefined")) +
                           " but the input has shape " + e.shape.str() + " " + dtype_name(e.dtype));
  }
  if (anomaly_enabled()) check_finite(g, node_, i);
  if (e.leaf) {
    Tensor& dst = e.leaf->grad;
    if (!dst.defined()) dst = g.clone();  // the leaf owns its gradient: never alias a temporary
    else kernels::add_(dst, g);
    return;
  }
  Node& next = *e.node;
  if (!next.pending_.defined()) {
    next.pending_ = g;  // borrowed: copied only if a second gradient arrives
    next.pending_borrowed_ = true;
  } else if (next.pending_borrowed_) {
    next.pending_ = kernels::add(next.pending_, g);
    next.pending_borrowed_ = false;
  } else {
    kernels::add_(next.pending_, g);
  }
}

void run_backward(const std::vector<Variable>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  if (roots.size() != grads.size()) throw std::logic_error("backward: one gradient slot per root is needed");
  // Seed the roots.
  // Nodes are held by shared_ptr for the whole pass: releasing a node drops its edges, and
  // with them possibly the last owner of a node still waiting in `order`.
  std::vector<std::shared_ptr<Node>> starts;
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
    GradSink(seeder).add(0, seed);
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

  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node& node = **it;
    Tensor g = std::move(node.pending_);
    node.pending_ = Tensor();
    node.pending_borrowed_ = false;
    if (g.defined()) {
      GradSink sink(node);
      if (Profiler* profiler = profiling::active()) {
        const auto start = std::chrono::steady_clock::now();
        node.fn_(g, sink);
        profiler->add(node.name() + " backward",
                      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      } else {
        node.fn_(g, sink);
      }
    }
    if (!retain_graph) node.release();
  }
  profiling::restart_clock();
}

}  // namespace ag
