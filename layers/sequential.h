// Containers. Children are named "0", "1", ... in order, as in PyTorch, so their parameters
// appear as "0.weight", "blocks.1.attn.w_q.weight" and so on.
//
// Sequential: runs its children one after another, x: whatever the first child takes ->
// whatever the last returns. Every child needs a `Variable forward(const Variable&)`.
//   Sequential net(std::make_unique<Linear>(4, 8), std::make_unique<ReLU>(), std::make_unique<Linear>(8, 2));
//
// ModuleList: holds children in order without running them (its owner decides how, e.g. a
// stack of transformer blocks that also take a mask).
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attograd/layers/module.h"

namespace ag {

template <class M>
concept UnaryLayer = std::derived_from<M, Module> && requires(M& m, const Variable& x) {
  { m.forward(x) } -> std::convertible_to<Variable>;
};

class Sequential : public Module {
 public:
  Sequential() = default;
  template <UnaryLayer... Ms>
  explicit Sequential(std::unique_ptr<Ms>... modules) {
    (push_back(std::move(modules)), ...);
  }

  // Appends a child named by its position; returns it.
  template <UnaryLayer M>
  M& push_back(std::unique_ptr<M> module) {
    M& m = register_module(std::to_string(steps_.size()), std::move(module));
    steps_.push_back([&m](const Variable& x) { return Variable(m.forward(x)); });
    return m;
  }

  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }
  size_t size() const { return steps_.size(); }
  std::string name() const override { return "Sequential"; }

 private:
  std::vector<std::function<Variable(const Variable&)>> steps_;
};

template <class M>
class ModuleList : public Module {
 public:
  static_assert(std::derived_from<M, Module>, "ModuleList<M>: M must derive from ag::Module");

  M& push_back(std::unique_ptr<M> module) {
    M& m = register_module(std::to_string(items_.size()), std::move(module));
    items_.push_back(&m);
    return m;
  }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) { return *items_.at(i); }
  const M& operator[](size_t i) const { return *items_.at(i); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  std::string name() const override { return "ModuleList"; }

 private:
  std::vector<M*> items_;
};

}  // namespace ag
