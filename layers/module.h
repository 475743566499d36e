// Module: the base of every layer. A module owns named parameters (Variables that train),
// named buffers (Tensors that do not, e.g. a positional-encoding table) and named child
// modules, all registered in its constructor. Names are joined with dots into the paths that
// are also checkpoint keys, exactly as in PyTorch's state_dict: "blocks.0.attn.w_q.weight".
//
//   class Affine : public Module {
//    public:
//     explicit Affine(int64_t n)
//         : weight_(register_parameter("weight", ones({n}))),
//           bias_(register_parameter("bias", zeros({n}))) {}
//     Variable forward(const Variable& x) { return x * weight_ + bias_; }  // x: (..., n)
//     std::string name() const override { return "Affine"; }
//    private:
//     Variable& weight_;
//     Variable& bias_;
//   };
//
// Invariants:
//   * the handles returned by register_* stay valid for the module's lifetime; to(dtype) and
//     load_state_dict() change values in place, so they keep pointing at the live parameter;
//   * modules are neither copyable nor movable (a parent holds references into its children);
//   * forward is an ordinary member with whatever signature suits the layer; there is no
//     virtual forward. train() and eval() run the same code except for dropout.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attograd/autograd/variable.h"

namespace ag {

class Module;

// A child registered with register_replaceable: the owner reaches it through this handle, so
// that replace_module can put another module of the same type (a LoRALinear for a Linear) in its
// place without the owner's knowing. Valid for the owner's lifetime.
template <class M>
class Replaceable {
 public:
  M& operator*() const { return static_cast<M&>(**holder_); }
  M* operator->() const { return &**this; }

 private:
  friend class Module;
  explicit Replaceable(const std::unique_ptr<Module>* holder) : holder_(holder) {}
  const std::unique_ptr<Module>* holder_;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = delete;
  Module& operator=(Module&&) = delete;

  // Each name must be a non-empty identifier without '.' and unused among this module's
  // parameters, buffers and children; otherwise std::invalid_argument naming it.
  Variable& register_parameter(std::string name, Tensor value, bool requires_grad = true);
  Tensor& register_buffer(std::string name, Tensor value);
  template <class M>
  M& register_module(std::string name, std::unique_ptr<M> module);
  // register_module for a child that may later be replaced by another M (replace_module).
  template <class M>
  Replaceable<M> register_replaceable(std::string name, std::unique_ptr<M> module);

  // Puts `module` in place of the descendant at the dotted `path` ("blocks.0.attn.w_q"), at the
  // same place in the registration order, with this tree's training mode, and returns the
  // module it replaces. The descendant must have been registered with register_replaceable<M>
  // and `module` must be an M; std::invalid_argument naming the path and the types otherwise.
  std::unique_ptr<Module> replace_module(const std::string& path, std::unique_ptr<Module> module);
  // Whether replace_module(path, <a module like candidate>) would be accepted.
  bool is_replaceable(const std::string& path, const Module& candidate);

  // Own entries first, then each child's, in registration order (PyTorch's order).
  NamedVariables named_parameters() const;
  // named_parameters() that require grad: what an optimizer updates (frozen ones left out).
  NamedVariables trainable_parameters() const;
  std::vector<Variable> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Direct children only.
  std::vector<std::pair<std::string, const Module*>> named_children() const;
  // Every descendant (not this module) by dotted path, parents before their children, in
  // registration order: "blocks", "blocks.0", "blocks.0.attn", "blocks.0.attn.w_q", ...
  std::vector<std::pair<std::string, Module*>> named_modules();

  // Parameters and buffers by dotted name. The tensors share storage with the module (no
  // copy): save or clone them before the module changes if a snapshot is needed.
  StateDict state_dict() const;
  // Copies every tensor into the matching parameter or buffer (converting to the module's
  // dtype). Checks everything before copying anything: a wrongly shaped tensor is always an
  // error; with `strict`, so are missing and unexpected names. The std::invalid_argument
  // names every offending tensor with its shape.
  void load_state_dict(const StateDict& state, bool strict = true);

  // Sets training mode on this module and every descendant (dropout is active in training).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Drops every parameter's gradient (the next backward starts it afresh).
  void zero_grad();
  // Converts every parameter and buffer, in place, so that the handles stay valid.
  void to(DType dtype);

  // A tree of modules, one line per parameter with its shape, and the totals.
  std::string summary() const;
  // Elements over all parameters (trainable or not), as PyTorch's sum(p.numel()).
  int64_t num_parameters() const;

  // Type name shown in the summary.
  virtual std::string name() const { return "Module"; }
  // Whether this module's own forward (not its children's) draws from the random generator in
  // training mode, as dropout with a rate above zero does. check_layer asks every module of a
  // tree, so a layer that calls dropout() itself, rather than holding a Dropout, overrides it.
  virtual bool draws_random_numbers_in_training() const { return false; }

 protected:
  // For layers: throws std::invalid_argument unless x has `dtype`, naming the layer and the
  // fix (modules start in f32; to(DType::f64) converts them).
  void require_dtype(const Variable& x, DType dtype, const char* what) const;

 private:
  struct Child {
    std::string name;
    std::unique_ptr<Module> module;
    // Set by register_replaceable: whether a module may take this child's place, and the
    // type it must have (for messages).
    std::function<bool(const Module&)> accepts{};
    std::string slot_type{};
  };
  void check_new_name(const std::string& name, const char* kind) const;
  Child& add_child(std::string name, std::unique_ptr<Module> module);
  // The descendant at a dotted path with the module that owns it; null (and `why` says so)
  // when there is none.
  std::pair<Module*, Child*> find_child(const std::string& path, std::string& why);
  // Records this module's dotted path ("blocks.0.") below and renames the parameters to
  // their full paths, so gradcheck reports and errors show "blocks.0.attn.w_q.weight".
  void set_path(const std::string& path);
  void collect_parameters(const std::string& prefix, NamedVariables& out) const;
  void collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  void summarize(const std::string& label, int depth, std::string& out) const;

  // deques: push_back keeps references to existing elements valid.
  std::deque<std::pair<std::string, Variable>> parameters_;
  std::deque<std::pair<std::string, Tensor>> buffers_;
  std::deque<Child> children_;
  std::string path_;  // "" for a root, "parent.child." once registered
  bool training_ = true;
};

// Puts a module in eval mode for one scope and back into the mode it had, also when the scope
// ends by an exception: evaluation and decoding must not leave a training model in eval mode.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& m) : module_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

template <class M>
M& Module::register_module(std::string name, std::unique_ptr<M> module) {
  static_assert(std::is_base_of_v<Module, M>, "register_module: M must derive from ag::Module");
  M* handle = module.get();
  add_child(std::move(name), std::move(module));  // throws (naming it) for a null module
  return *handle;
}

template <class M>
Replaceable<M> Module::register_replaceable(std::string name, std::unique_ptr<M> module) {
  static_assert(std::is_base_of_v<Module, M>, "register_replaceable: M must derive from ag::Module");
  Child& child = add_child(std::move(name), std::move(module));  // throws for a null module
  child.accepts = [](const Module& m) { return dynamic_cast<const M*>(&m) != nullptr; };
  child.slot_type = child.module->name();
  return Replaceable<M>(&child.module);
}

}  // namespace ag
