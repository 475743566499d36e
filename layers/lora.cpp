#include "attograd/layers/lora.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"
#include "attograd/core/kernels.h"

namespace ag {

namespace {

std::string sizes(const LinearOptions& o) {
  return "in=" + std::to_string(o.in_features) + " out=" + std::to_string(o.out_features);
}

const LoRAOptions& checked(const LoRAOptions& o, const Linear& base, const std::string& where) {
  const LinearOptions& l = base.options();
  const int64_t most = std::min(l.in_features, l.out_features);
  if (o.rank < 1 || o.rank > most) {
    throw std::invalid_argument("LoRALinear" + where + ": rank " + std::to_string(o.rank) + " must lie in [1, " +
                                std::to_string(most) + "] for a Linear of " + sizes(l) +
                                " (a rank beyond min(in, out) adds parameters, not expressiveness)");
  }
  if (!std::isfinite(o.alpha) || !(o.alpha > 0)) {
    std::ostringstream os;
    os << "LoRALinear" << where << ": alpha must be finite and positive, got " << o.alpha;
    throw std::invalid_argument(os.str());
  }
  return o;
}

Tensor bias_of(const Linear& base) { return base.bias().defined() ? base.bias().value() : Tensor(); }

// "blocks.3.attn.w_q" -> "attn.w_q": what follows the last index of a list, the name a layer
// has in every block alike.
std::string without_index(const std::string& path) {
  size_t start = 0, begin = 0;
  while (begin < path.size()) {
    size_t end = path.find('.', begin);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(begin, end - begin);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      start = end + 1;
    }
    begin = end + 1;
  }
  return start < path.size() ? path.substr(start) : path;
}

bool names(const std::string& target, const std::string& path) {
  return path == target || (path.size() > target.size() && path.compare(path.size() - target.size(), target.size(), target) == 0 &&
                            path[path.size() - target.size() - 1] == '.');
}

}  // namespace

LoRALinear::LoRALinear(const Linear& base, const LoRAOptions& options)
    : Linear(base.options(), base.weight().value(), bias_of(base), /*trainable=*/false),
      options_(checked(options, base, "")) {
  const LinearOptions& l = base.options();
  const double bound = 1.0 / std::sqrt(static_cast<double>(l.in_features));
  const DType dtype = base.weight().dtype();
  lora_a_ = register_parameter("lora_a", uniform({options_.rank, l.in_features}, -bound, bound, default_generator(), dtype));
  lora_b_ = register_parameter("lora_b", zeros({l.out_features, options_.rank}, dtype));
}

Variable LoRALinear::forward(const Variable& x) {
  Variable y = Linear::forward(x);  // checks the input's shape and dtype
  if (merged_) return y;
  // (..., in) -> (..., r) -> (..., out); the scale goes on the narrow (..., r) product.
  return y + linear(linear(x, lora_a_) * scaling(), lora_b_);
}

void LoRALinear::merge() {
  if (merged_) throw std::logic_error(name() + ": merge() called twice; the update is already in the weight");
  NoGradGuard no_grad;
  Variable w = weight();
  kernels::add_(w.mutable_value(), kernels::matmul(lora_b_.value(), lora_a_.value()), scaling());
  merged_ = true;
}

std::string LoRALinear::name() const {
  std::ostringstream os;
  os << "LoRALinear(rank " << options_.rank << ", alpha " << options_.alpha << (merged_ ? ", merged" : "") << ")";
  return os.str();
}

std::vector<std::string> apply_lora(Module& model, const std::vector<std::string>& targets, const LoRAOptions& options) {
  if (targets.empty()) throw std::invalid_argument("apply_lora: no target names (e.g. w_q, w_v)");
  std::vector<std::pair<std::string, Linear*>> linears;
  for (auto& [path, m] : model.named_modules()) {
    if (auto* l = dynamic_cast<Linear*>(m)) linears.emplace_back(path, l);
  }
  for (const std::string& target : targets) {
    const bool found = std::any_of(linears.begin(), linears.end(), [&](const auto& e) { return names(target, e.first); });
    if (!found) {
      std::vector<std::string> known;
      for (auto& [path, l] : linears) {
        const std::string n = without_index(path);
        if (std::find(known.begin(), known.end(), n) == known.end()) known.push_back(n);
      }
      std::string list;
      for (const std::string& n : known) list += (list.empty() ? "" : ", ") + n;
      throw std::invalid_argument("apply_lora (" + model.name() + "): no Linear is named '" + target + "'; its Linears are " +
                                  (list.empty() ? std::string("none") : list));
    }
  }
  // In registration order, each once.
  std::vector<std::string> chosen;
  for (auto& [path, l] : linears) {
    if (std::none_of(targets.begin(), targets.end(), [&](const std::string& t) { return names(t, path); })) continue;
    if (dynamic_cast<LoRALinear*>(l) != nullptr) {
      throw std::invalid_argument("apply_lora: '" + path + "' already has an adapter (" + l->name() + ")");
    }
    if (!model.is_replaceable(path, *l)) {
      throw std::invalid_argument("apply_lora: the Linear '" + path + "' is held by its owner as itself and cannot " +
                                  "be replaced");
    }
    chosen.push_back(path);
  }
  // Every adapter is built (its rank checked against its layer) before any is put in place.
  std::vector<std::unique_ptr<LoRALinear>> built;
  for (const std::string& path : chosen) {
    Linear* l = std::find_if(linears.begin(), linears.end(), [&](const auto& e) { return e.first == path; })->second;
    checked(options, *l, " at '" + path + "'");
    built.push_back(std::make_unique<LoRALinear>(*l, options));
  }
  for (size_t i = 0; i < chosen.size(); ++i) model.replace_module(chosen[i], std::move(built[i]));
  return chosen;
}

int64_t merge_lora(Module& model) {
  std::vector<std::pair<std::string, LoRALinear*>> found;
  for (auto& [path, m] : model.named_modules()) {
    if (auto* l = dynamic_cast<LoRALinear*>(m)) found.emplace_back(path, l);
  }
  for (auto& [path, l] : found) {
    if (!l->merged()) l->merge();
    model.replace_module(path, std::make_unique<Linear>(l->options(), l->weight().value(), bias_of(*l)));
  }
  return static_cast<int64_t>(found.size());
}

}  // namespace ag
