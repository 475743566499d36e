#include "attograd/layers/module.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <stdexcept>

namespace ag {

namespace {

bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

int64_t own_count(const std::deque<std::pair<std::string, Variable>>& params) {
  int64_t n = 0;
  for (const auto& [name, p] : params) n += p.numel();
  return n;
}

}  // namespace

void Module::check_new_name(const std::string& name, const char* kind) const {
  if (!valid_name(name)) {
    throw std::invalid_argument(std::string("register_") + kind + ": name '" + name +
                                "' must be non-empty and made of letters, digits and '_' (no '.': dots join paths)");
  }
  const auto taken = [&](const auto& entries, auto key) {
    return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return key(e) == name; });
  };
  const auto first = [](const auto& e) -> const std::string& { return e.first; };
  const bool used = taken(parameters_, first) || taken(buffers_, first) ||
                    taken(children_, [](const Child& c) -> const std::string& { return c.name; });
  if (used) {
    throw std::invalid_argument(std::string("register_") + kind + ": name '" + name + "' is already used in " +
                                this->name() + " (by a parameter, buffer or child module)");
  }
}

Variable& Module::register_parameter(std::string name, Tensor value, bool requires_grad) {
  check_new_name(name, "parameter");
  if (!value.defined()) throw std::invalid_argument("register_parameter: '" + name + "' has an undefined tensor");
  // A parameter owns its elements: a view of someone else's storage would be updated behind
  // their back by the optimizer.
  Variable var(value.clone(), requires_grad, path_ + name);
  parameters_.emplace_back(std::move(name), std::move(var));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(std::string name, Tensor value) {
  check_new_name(name, "buffer");
  if (!value.defined()) throw std::invalid_argument("register_buffer: '" + name + "' has an undefined tensor");
  buffers_.emplace_back(std::move(name), value.clone());
  return buffers_.back().second;
}

Module::Child& Module::add_child(std::string name, std::unique_ptr<Module> module) {
  check_new_name(name, "module");
  if (!module) throw std::invalid_argument("register_module: '" + name + "' is a null module");
  module->set_path(path_ + name + ".");
  module->train(training_);
  children_.push_back({std::move(name), std::move(module)});
  return children_.back();
}

std::pair<Module*, Module::Child*> Module::find_child(const std::string& path, std::string& why) {
  Module* owner = this;
  std::string rest = path;
  for (;;) {
    const size_t dot = rest.find('.');
    const std::string part = rest.substr(0, dot);
    const auto it = std::find_if(owner->children_.begin(), owner->children_.end(),
                                 [&](const Child& c) { return c.name == part; });
    if (it == owner->children_.end()) {
      why = "names no module (no child '" + part + "')";
      return {nullptr, nullptr};
    }
    if (dot == std::string::npos) return {owner, &*it};
    owner = it->module.get();
    rest = rest.substr(dot + 1);
  }
}

bool Module::is_replaceable(const std::string& path, const Module& candidate) {
  std::string why;
  const auto [owner, child] = find_child(path, why);
  return child != nullptr && child->accepts && child->accepts(candidate);
}

std::unique_ptr<Module> Module::replace_module(const std::string& path, std::unique_ptr<Module> module) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument("replace_module (" + name() + "): '" + path + "' " + why);
  };
  if (!module) fail("cannot be replaced by a null module");
  std::string why;
  const auto [owner, child] = find_child(path, why);
  if (child == nullptr) fail(why);
  if (!child->accepts) fail("was registered with register_module, which cannot be replaced");
  if (!child->accepts(*module)) fail("holds a " + child->slot_type + "; a " + module->name() + " cannot take its place");
  module->set_path(owner->path_ + child->name + ".");
  module->train(owner->training_);
  std::swap(child->module, module);
  return module;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  const auto walk = [&](auto& self, Module& m, const std::string& prefix) -> void {
    for (Child& c : m.children_) {
      out.emplace_back(prefix + c.name, c.module.get());
      self(self, *c.module, prefix + c.name + ".");
    }
  };
  walk(walk, *this, "");
  return out;
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [name, p] : parameters_) p.set_name(path_ + name);
  for (Child& c : children_) c.module->set_path(path_ + c.name + ".");
}

void Module::collect_parameters(const std::string& prefix, NamedVariables& out) const {
  for (const auto& [name, p] : parameters_) out.emplace_back(prefix + name, p);
  for (const Child& c : children_) c.module->collect_parameters(prefix + c.name + ".", out);
}

void Module::collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, b] : buffers_) out.emplace_back(prefix + name, b);
  for (const Child& c : children_) c.module->collect_buffers(prefix + c.name + ".", out);
}

NamedVariables Module::named_parameters() const {
  NamedVariables out;
  collect_parameters("", out);
  return out;
}

NamedVariables Module::trainable_parameters() const {
  NamedVariables out;
  for (auto& [name, p] : named_parameters()) {
    if (p.requires_grad()) out.emplace_back(name, p);
  }
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_buffers("", out);
  return out;
}

std::vector<std::pair<std::string, const Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, const Module*>> out;
  for (const Child& c : children_) out.emplace_back(c.name, c.module.get());
  return out;
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, p] : named_parameters()) out.emplace_back(name, p.value());
  for (auto& [name, b] : named_buffers()) out.emplace_back(name, b);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  // Destinations by name: the live tensors inside parameters and buffers.
  std::map<std::string, Tensor*> targets;
  std::vector<std::string> order;
  const auto gather = [&](auto& self, Module& m, const std::string& prefix) -> void {
    for (auto& [name, p] : m.parameters_) {
      targets[prefix + name] = &p.mutable_value();
      order.push_back(prefix + name);
    }
    for (auto& [name, b] : m.buffers_) {
      targets[prefix + name] = &b;
      order.push_back(prefix + name);
    }
    for (Child& c : m.children_) self(self, *c.module, prefix + c.name + ".");
  };
  gather(gather, *this, "");

  std::vector<std::string> problems;
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) {
    if (!given.emplace(name, &t).second) {
      problems.push_back("duplicate tensor '" + name + "'");
      continue;
    }
    const auto it = targets.find(name);
    if (it == targets.end()) {
      if (strict) {
        problems.push_back("unexpected tensor '" + name + "' " + (t.defined() ? t.shape().str() : "undefined"));
      }
    } else if (!t.defined() || t.shape() != it->second->shape()) {
      problems.push_back("tensor '" + name + "' has shape " + (t.defined() ? t.shape().str() : "undefined") +
                         " but the module expects " + it->second->shape().str());
    }
  }
  if (strict) {
    for (const std::string& name : order) {
      if (!given.count(name)) problems.push_back("missing tensor '" + name + "' " + targets[name]->shape().str());
    }
  }
  if (!problems.empty()) {
    std::string msg = "load_state_dict (" + name() + "): ";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    throw std::invalid_argument(msg);
  }
  for (const auto& [name, t] : state) {
    const auto it = targets.find(name);
    if (it != targets.end()) it->second->copy_(*given[name]);
  }
}

void Module::train(bool on) {
  training_ = on;
  for (Child& c : children_) c.module->train(on);
}

void Module::zero_grad() {
  for (auto& [name, p] : parameters_) p.zero_grad();
  for (Child& c : children_) c.module->zero_grad();
}

void Module::to(DType dtype) {
  for (auto& [name, p] : parameters_) {
    if (p.dtype() == dtype) continue;
    Tensor grad = p.grad().defined() ? p.grad().to(dtype) : Tensor();
    p.zero_grad();  // set_grad below would refuse a gradient of the old dtype
    p.mutable_value() = p.value().to(dtype);
    p.set_grad(std::move(grad));
  }
  for (auto& [name, b] : buffers_) b = b.to(dtype);
  for (Child& c : children_) c.module->to(dtype);
}

int64_t Module::num_parameters() const {
  int64_t n = own_count(parameters_);
  for (const Child& c : children_) n += c.module->num_parameters();
  return n;
}

void Module::summarize(const std::string& label, int depth, std::string& out) const {
  const std::string indent(static_cast<size_t>(depth) * 2, ' ');
  out += indent + (label.empty() ? "" : label + ": ") + name();
  const int64_t total = num_parameters();
  if (total > 0) out += "  [" + std::to_string(total) + " params]";
  out += (training_ ? "" : "  (eval)");
  out += '\n';
  for (const auto& [pname, p] : parameters_) {
    out += indent + "  " + pname + " " + p.shape().str() + " " + dtype_name(p.dtype()) + "  " +
           std::to_string(p.numel()) + (p.requires_grad() ? "" : " (frozen)") + '\n';
  }
  for (const auto& [bname, b] : buffers_) {
    out += indent + "  " + bname + " " + b.shape().str() + " " + dtype_name(b.dtype()) + "  (buffer)\n";
  }
  for (const Child& c : children_) c.module->summarize(c.name, depth + 1, out);
}

std::string Module::summary() const {
  std::string out;
  summarize("", 0, out);
  int64_t trainable = 0;
  for (const auto& [name, p] : trainable_parameters()) trainable += p.numel();
  out += "total parameters: " + std::to_string(num_parameters()) + " (trainable: " + std::to_string(trainable) + ")\n";
  return out;
}

void Module::require_dtype(const Variable& x, DType dtype, const char* what) const {
  if (x.dtype() != dtype) {
    throw std::invalid_argument(name() + ": " + what + " " + x.shape().str() + " has dtype " + dtype_name(x.dtype()) +
                                " but the module's parameters are " + dtype_name(dtype) +
                                " (convert the module with to(DType::" + dtype_name(x.dtype()) + "))");
  }
}

}  // namespace ag
