// Variable: a Tensor that takes part in reverse-mode differentiation.
//
// Every differentiable op returns a Variable whose `grad_fn` node remembers how to send a
// gradient back to the op's inputs. The graph is made of nodes only: a node holds edges to the
// nodes (or leaves) its inputs came from and, in its backward closure, exactly the tensors its
// backward reads. Intermediate values no closure saved are freed as soon as the user drops them.
//
// The contract every op's backward keeps (tested by gradcheck for every op and layer):
//   * backward ADDS: gradients reaching a leaf are accumulated with +=, never assigned, so
//     calling backward() twice (with retain_graph) doubles the leaf gradients;
//   * the gradient handed to input i has exactly input i's shape and dtype (the engine checks
//     it and throws std::logic_error naming the op otherwise);
//   * non-leaf gradients live only for the duration of one backward() call.
//
// Writing an op (see docs/extending.md):
//   Variable scale(const Variable& x, double k) {
//     Tensor y = kernels::affine(x.value(), k, 0.0);
//     return make_result("scale", std::move(y), {x}, [k](const Tensor& g, GradSink& grads) {
//       grads.add(0, kernels::affine(g, k, 0.0));
//     });
//   }
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attograd/core/tensor.h"

namespace ag {

class Node;
struct Edge;
struct VariableImpl;
class Variable;

// Called during backward() once a leaf's gradient for this pass is final: every node of the
// pass that sends it a gradient has run. See Variable::set_grad_ready_hook.
using GradReadyHook = std::function<void(const Variable& leaf)>;

class Variable {
 public:
  Variable() = default;
  // A leaf. Parameters and inputs one differentiates with respect to use requires_grad = true.
  explicit Variable(Tensor value, bool requires_grad = false, std::string name = {});

  bool defined() const { return impl_ != nullptr; }
  const Tensor& value() const;
  // Mutable access for optimizers and initialisers (in-place updates of leaves).
  Tensor& mutable_value();
  // The accumulated gradient of a leaf; undefined until a backward pass reaches it.
  const Tensor& grad() const;
  Tensor& mutable_grad();
  void set_grad(Tensor grad);
  // Drops the gradient (the next backward starts it afresh), like PyTorch's set_to_none.
  void zero_grad();

  // For leaves: `hook` runs inside every backward() that reaches this leaf, right after the
  // last gradient of that pass has been added to grad(), while backward goes on with the other
  // nodes (PyTorch's post-accumulate-grad hook). What it may do: read or hand off grad() (a
  // data-parallel run starts summing it across processes there), not change the graph. It is
  // not called for a leaf the pass does not reach. An exception from it leaves backward() as
  // it came. An empty function removes the hook. std::logic_error on a non-leaf.
  Variable& set_grad_ready_hook(GradReadyHook hook);

  bool requires_grad() const;
  // Only for leaves: op results require grad exactly when one of their inputs does.
  Variable& set_requires_grad(bool requires_grad);
  bool is_leaf() const;
  const std::shared_ptr<Node>& grad_fn() const;

  const std::string& name() const;
  Variable& set_name(std::string name);

  const Shape& shape() const { return value().shape(); }
  DType dtype() const { return value().dtype(); }
  int64_t dim() const { return value().dim(); }
  int64_t numel() const { return value().numel(); }
  int64_t size(int64_t axis) const { return value().size(axis); }
  double item() const { return value().item(); }

  // A new leaf sharing this value's storage, outside the graph.
  Variable detach() const;

  // Reverse-mode pass from this variable. Without `grad` the variable must hold one element
  // (the gradient is 1). With retain_graph=false every node is freed after it has run, and a
  // second backward through it throws std::logic_error.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;

  // Identity of the underlying variable (two handles may share one).
  const VariableImpl* id() const { return impl_.get(); }
  const std::shared_ptr<VariableImpl>& impl() const { return impl_; }
  static Variable from_impl(std::shared_ptr<VariableImpl> impl);

 private:
  void require_defined(const char* op) const;
  std::shared_ptr<VariableImpl> impl_;
};

struct VariableImpl {
  Tensor value;
  Tensor grad;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  std::string name;
  GradReadyHook grad_ready_hook;  // leaves only; see Variable::set_grad_ready_hook
};

// Where a node's backward puts the gradients of its inputs. Index i is the op's i-th input in
// the order given to make_result. Every entry point ADDS to input i's gradient (a leaf's grad,
// or the gradient a producing node is gathering during this pass), never assigns; each checks
// the gradient's shape and dtype against input i's and throws std::logic_error naming the op.
class GradSink {
 public:
  // Whether input i needs a gradient at all; skip the work when it does not.
  bool wants(size_t i) const;
  // Adds g to input i's gradient. g must have input i's shape and dtype. The const& form never
  // keeps g's storage (the caller may still write to it): a leaf's first gradient is a copy.
  void add(size_t i, const Tensor& g);
  // The same for a temporary: when g is contiguous and nothing else shares its storage, a
  // first gradient takes it over instead of copying it.
  void add(size_t i, Tensor&& g);
  // Adds the matrix product a b, a: (M, K), b: (K, N), to input i's gradient: the product's
  // M * N elements, in row-major order, are the gradient's in its own shape (a plain reshape,
  // which is all the engine knows; the op decides what its rows mean). When that gradient
  // already exists (a leaf's grad, or one a node is gathering and owns) the product is
  // accumulated into it by BLAS with beta = 1: no temporary, no separate addition; otherwise
  // the product becomes the gradient.
  void add_matmul(size_t i, const Tensor& a, const Tensor& b);
  // Adds row r of `rows` (R, D) to row at[r] of input i's gradient, seen as (N, D): a scatter
  // into a table's gradient (embedding's backward). The rows named in `at` must differ. As in
  // add_matmul, when that gradient already exists the rows are added in place, so the cost is
  // the rows touched, not a table-sized temporary; otherwise a zero table holding the rows
  // becomes the gradient. Each element is added once either way, so both give the same bits.
  void add_rows(size_t i, const Tensor& rows, const std::vector<int64_t>& at);
  // Whether this node's backward can run again (backward with retain_graph). When not, the
  // node is freed right after this call, and a closure declared `mutable` may drop a saved
  // tensor as soon as it has read it, so that its memory serves the gradients still to come
  // in this call (linear drops x after dW = g^T x, before it allocates dx).
  bool graph_retained() const { return retain_graph_; }
  // For an op that runs a backward pass of its own over a copy of its computation (recompute.h):
  // the gradient gathered so far in this pass for input i, which must be an op's result, and
  // no longer gathered there (the op hands back the total with add). Undefined when nothing has
  // arrived yet, or when input i is a leaf or needs no gradient. Never shares storage with a
  // tensor someone else holds.
  Tensor take_gathered(size_t i);

 private:
  friend void run_backward(const std::vector<Variable>&, const std::vector<Tensor>&, bool, bool);
  GradSink(Node& node, bool retain_graph) : node_(node), retain_graph_(retain_graph) {}
  // The edge of input i after checking that it exists; `shape`/`dtype` are what the op hands
  // over (checked against the input when the edge is active).
  const Edge& checked_edge(size_t i, const Shape& shape, DType dtype, bool defined) const;
  void accumulate(size_t i, Tensor g, bool owned);
  // The gradient of input i that an in-place addition may write to (a leaf's, or the one a
  // node is gathering and owns), or null: then the caller makes one and hands it to accumulate.
  Tensor* in_place_target(size_t i);
  Node& node_;
  bool retain_graph_;
};

using BackwardFn = std::function<void(const Tensor& grad_output, GradSink& grads)>;

// Where a gradient goes: the node that produced an input, or the input itself when it is a
// leaf that requires grad. Empty for inputs that need no gradient.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<VariableImpl> leaf;
  Shape shape;
  DType dtype = DType::f32;
  bool active() const { return node != nullptr || leaf != nullptr; }
};

class Node {
 public:
  Node(std::string name, std::vector<Edge> edges, BackwardFn fn)
      : name_(std::move(name)), edges_(std::move(edges)), fn_(std::move(fn)) {}
  // Unlinks the nodes only this one keeps alive iteratively: a long chain freed recursively
  // would take one stack frame per node.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<Edge>& edges() const { return edges_; }
  bool released() const { return released_; }

 private:
  friend class GradSink;
  friend void run_backward(const std::vector<Variable>&, const std::vector<Tensor>&, bool, bool);
  void release();

  std::string name_;
  std::vector<Edge> edges_;
  BackwardFn fn_;
  bool released_ = false;
  Tensor pending_;               // gradient gathered for this node's output during one pass
  bool pending_borrowed_ = false;  // pending_ aliases a tensor someone else owns: copy before +=
};

// Builds an op's result. When grad mode is on and some input requires grad, the result gets a
// node named `op` that calls `backward` with the result's gradient; otherwise `backward` (and
// whatever it captured) is dropped on the spot.
Variable make_result(const char* op, Tensor value, const std::vector<Variable>& inputs, BackwardFn backward);

// True when grad mode is on and one of `inputs` requires grad: ops use it to skip saving
// tensors nobody will read.
bool any_requires_grad(const std::vector<Variable>& inputs);

// Named collections, in registration order with dotted names ("blocks.0.attn.w_q.weight"):
// what Module::named_parameters() and state_dict() return and what optimizers consume.
using NamedVariables = std::vector<std::pair<std::string, Variable>>;
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// Backward from several roots at once (each with its gradient, or none for one-element roots).
// run_hooks = false leaves the leaves' grad-ready hooks alone: for a pass nested in another
// (recompute.h), whose leaves' gradients are final only when the outer pass says so.
void run_backward(const std::vector<Variable>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                  bool run_hooks = true);

}  // namespace ag
