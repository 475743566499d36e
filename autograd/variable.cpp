// Variable accessors, grad mode, and make_result (how an op joins the graph).
#include "attograd/autograd/variable.h"

#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/profiler.h"

namespace ag {

namespace {
thread_local bool g_grad_enabled = true;
thread_local bool g_anomaly_enabled = false;
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool enabled) { g_grad_enabled = enabled; }
bool anomaly_enabled() { return g_anomaly_enabled; }
void set_anomaly_enabled(bool enabled) { g_anomaly_enabled = enabled; }

Variable::Variable(Tensor value, bool requires_grad, std::string name) : impl_(std::make_shared<VariableImpl>()) {
  if (!value.defined()) throw std::invalid_argument("Variable: the value tensor is undefined");
  impl_->value = std::move(value);
  impl_->requires_grad = requires_grad;
  impl_->name = std::move(name);
}

Variable Variable::from_impl(std::shared_ptr<VariableImpl> impl) {
  Variable v;
  v.impl_ = std::move(impl);
  return v;
}

void Variable::require_defined(const char* op) const {
  if (!impl_) throw std::logic_error(std::string("Variable::") + op + ": the variable is undefined (default-constructed)");
}

const Tensor& Variable::value() const {
  require_defined("value");
  return impl_->value;
}

Tensor& Variable::mutable_value() {
  require_defined("mutable_value");
  return impl_->value;
}

const Tensor& Variable::grad() const {
  require_defined("grad");
  return impl_->grad;
}

Tensor& Variable::mutable_grad() {
  require_defined("mutable_grad");
  return impl_->grad;
}

void Variable::set_grad(Tensor grad) {
  require_defined("set_grad");
  if (grad.defined() && (grad.shape() != shape() || grad.dtype() != dtype())) {
    throw std::invalid_argument("set_grad: gradient " + grad.shape().str() + " " + dtype_name(grad.dtype()) +
                                " does not match variable '" + impl_->name + "' " + shape().str() + " " +
                                dtype_name(dtype()));
  }
  impl_->grad = std::move(grad);
}

void Variable::zero_grad() {
  require_defined("zero_grad");
  impl_->grad = Tensor();
}

Variable& Variable::set_grad_ready_hook(GradReadyHook hook) {
  require_defined("set_grad_ready_hook");
  if (impl_->grad_fn) {
    throw std::logic_error("set_grad_ready_hook: '" + impl_->grad_fn->name() + "' produced this variable of shape " +
                           shape().str() + "; only leaves have a final gradient to announce");
  }
  impl_->grad_ready_hook = std::move(hook);
  return *this;
}

bool Variable::requires_grad() const { return impl_ && impl_->requires_grad; }

Variable& Variable::set_requires_grad(bool requires_grad) {
  require_defined("set_requires_grad");
  if (impl_->grad_fn) {
    throw std::logic_error("set_requires_grad: '" + impl_->grad_fn->name() + "' produced this variable of shape " +
                           shape().str() + "; only leaves can change requires_grad (use detach())");
  }
  impl_->requires_grad = requires_grad;
  return *this;
}

bool Variable::is_leaf() const { return impl_ && !impl_->grad_fn; }

const std::shared_ptr<Node>& Variable::grad_fn() const {
  require_defined("grad_fn");
  return impl_->grad_fn;
}

const std::string& Variable::name() const {
  require_defined("name");
  return impl_->name;
}

Variable& Variable::set_name(std::string name) {
  require_defined("set_name");
  impl_->name = std::move(name);
  return *this;
}

Variable Variable::detach() const {
  require_defined("detach");
  return Variable(impl_->value, false, impl_->name);
}

void Variable::backward(const Tensor& grad, bool retain_graph) const {
  require_defined("backward");
  run_backward({*this}, {grad}, retain_graph);
}

bool any_requires_grad(const std::vector<Variable>& inputs) {
  if (!grad_enabled()) return false;
  for (const Variable& v : inputs) {
    if (v.requires_grad()) return true;
  }
  return false;
}

Variable make_result(const char* op, Tensor value, const std::vector<Variable>& inputs, BackwardFn backward) {
  auto impl = std::make_shared<VariableImpl>();
  impl->value = std::move(value);
  if (any_requires_grad(inputs)) {
    std::vector<Edge> edges;
    edges.reserve(inputs.size());
    for (const Variable& in : inputs) {
      Edge e;
      if (in.requires_grad()) {
        if (in.is_leaf()) e.leaf = in.impl();
        else e.node = in.grad_fn();
        e.shape = in.shape();
        e.dtype = in.dtype();
      }
      edges.push_back(std::move(e));
    }
    impl->requires_grad = true;
    impl->grad_fn = std::make_shared<Node>(op, std::move(edges), std::move(backward));
  }
  profiling::mark_forward(op);
  return Variable::from_impl(std::move(impl));
}

}  // namespace ag
