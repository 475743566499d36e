#include "attograd/train/optim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string_view>

#include "attograd/autograd/grad_mode.h"
#include "attograd/core/parallel.h"

namespace ag {

namespace {

std::string num(double v) {
  std::string s = std::to_string(v);
  // to_string prints 6 decimals; small learning rates need more.
  if (v != 0 && std::abs(v) < 1e-3) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    s = buf;
  }
  return s;
}

void require(bool ok, const char* kind, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(kind) + ": " + what);
}

void check_lr(const char* kind, double lr) { require(std::isfinite(lr) && lr >= 0, kind, "invalid learning rate " + num(lr) + " (need lr >= 0)"); }

Tensor& slot(ParamState& s, const std::string& name) {
  if (name == "momentum_buffer") return s.momentum_buffer;
  if (name == "exp_avg") return s.exp_avg;
  return s.exp_avg_sq;
}

const Tensor& slot(const ParamState& s, const std::string& name) { return slot(const_cast<ParamState&>(s), name); }

constexpr const char* kAllSlots[] = {"momentum_buffer", "exp_avg", "exp_avg_sq"};

}  // namespace

Optimizer::Optimizer(NamedVariables params, double lr, const char* kind, const std::vector<std::string>& no_decay)
    : params_(std::move(params)), lr_(lr) {
  check_lr(kind, lr);
  require(!params_.empty(), kind, "got an empty parameter list");
  std::set<std::string> names;
  std::set<const VariableImpl*> seen;
  for (const auto& [name, p] : params_) {
    require(p.defined(), kind, "parameter '" + name + "' is undefined");
    require(names.insert(name).second, kind, "parameter name '" + name + "' appears twice");
    require(seen.insert(p.id()).second, kind, "parameter '" + name + "' is the same variable as an earlier one");
    require(p.is_leaf() && p.requires_grad(), kind,
            "parameter '" + name + "' must be a leaf that requires grad (got " +
                (p.is_leaf() ? "a leaf without requires_grad" : "the output of '" + p.grad_fn()->name() + "'") + ")");
    require(p.value().is_contiguous(), kind,
            "parameter '" + name + "' of shape " + p.shape().str() + " is a non-contiguous view");
  }
  states_.resize(params_.size());
  decays_.assign(params_.size(), true);
  for (const std::string& exempt : no_decay) {
    const auto it = std::find_if(params_.begin(), params_.end(), [&](const auto& p) { return p.first == exempt; });
    require(it != params_.end(), kind, "no_decay names '" + exempt + "', which is not one of the parameters");
    decays_[static_cast<size_t>(it - params_.begin())] = false;
  }
}

void Optimizer::set_lr(double lr) {
  check_lr(name(), lr);
  lr_ = lr;
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& [pname, p] = params_[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    Tensor& value = p.mutable_value();
    if (!value.is_contiguous() || g.shape() != value.shape() || g.dtype() != value.dtype()) {
      throw std::logic_error(std::string(name()) + "::step: parameter '" + pname + "' is " + value.shape().str() + " " +
                             dtype_name(value.dtype()) + (value.is_contiguous() ? "" : " (non-contiguous)") +
                             " but its gradient is " + g.shape().str() + " " + dtype_name(g.dtype()));
    }
    ParamState& s = states_[i];
    ++s.step;
    update(value, g.contiguous(), s, decays_[i]);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& [pname, p] : params_) {
    if (set_to_none) p.zero_grad();
    else if (p.grad().defined()) p.mutable_grad().fill_(0.0);
  }
}

OptimizerState Optimizer::state() const {
  OptimizerState out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamState& s = states_[i];
    if (s.step == 0) continue;
    ParamState copy;
    copy.step = s.step;
    // Copies: the exported state must not change under later steps.
    for (const char* name : kAllSlots) {
      if (slot(s, name).defined()) slot(copy, name) = slot(s, name).clone();
    }
    out.emplace_back(params_[i].first, std::move(copy));
  }
  return out;
}

void Optimizer::load_state(const OptimizerState& state) {
  const std::vector<std::string> wanted = state_slots();
  std::vector<ParamState> fresh(params_.size());
  std::vector<bool> given(params_.size(), false);
  const std::string who = std::string(name()) + "::load_state";
  for (const auto& [pname, s] : state) {
    size_t index = params_.size();
    for (size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].first == pname) index = i;
    }
    require(index < params_.size(), who.c_str(), "state for unknown parameter '" + pname + "'");
    require(!given[index], who.c_str(), "state for parameter '" + pname + "' given twice");
    given[index] = true;
    require(s.step >= 1 && s.step <= kMaxOptimizerStep, who.c_str(),
            "parameter '" + pname + "': step " + std::to_string(s.step) + " is outside [1, " +
                std::to_string(kMaxOptimizerStep) + "]");
    const Tensor& value = params_[index].second.value();
    for (const char* slot_name : kAllSlots) {
      const Tensor& t = slot(s, slot_name);
      const bool needed = std::find(wanted.begin(), wanted.end(), slot_name) != wanted.end();
      require(t.defined() == needed, who.c_str(),
              "parameter '" + pname + "': " + (needed ? "missing " : "unexpected ") + slot_name + " for " + name());
      if (!needed) continue;
      require(t.shape() == value.shape() && t.dtype() == value.dtype(), who.c_str(),
              "parameter '" + pname + "': " + slot_name + " is " + t.shape().str() + " " + dtype_name(t.dtype()) +
                  " but the parameter is " + value.shape().str() + " " + dtype_name(value.dtype()));
      // A second moment is a running mean of squares: never negative, and NaN in any slot
      // would turn the parameter into NaN at the next update.
      const bool squares = std::string_view(slot_name) == "exp_avg_sq";
      const double limit = squares ? kMaxStateMagnitude * kMaxStateMagnitude : kMaxStateMagnitude;
      const int64_t bad = first_value_outside(t, squares ? 0.0 : -limit, limit);
      if (bad >= 0) {
        require(false, who.c_str(),
                "parameter '" + pname + "': " + slot_name + " holds " + num(t.reshape({-1}).at({bad})) + " at index " +
                    index_str(t.shape(), bad) + " (allowed: " + (squares ? "0" : "-" + num(limit)) + " to " +
                    num(limit) + ")");
      }
    }
    ParamState& mine = fresh[index];
    mine.step = s.step;
    for (const std::string& slot_name : wanted) slot(mine, slot_name) = slot(s, slot_name).clone();
  }
  states_ = std::move(fresh);
}

// ---- SGD ----

SGD::SGD(NamedVariables params, const SGDOptions& options)
    : Optimizer(std::move(params), options.lr, "SGD", options.no_decay), options_(options) {
  require(std::isfinite(options.momentum) && options.momentum >= 0, "SGD", "invalid momentum " + num(options.momentum));
  require(std::isfinite(options.dampening), "SGD", "invalid dampening " + num(options.dampening));
  require(std::isfinite(options.weight_decay) && options.weight_decay >= 0, "SGD",
          "invalid weight_decay " + num(options.weight_decay));
  require(!options.nesterov || (options.momentum > 0 && options.dampening == 0), "SGD",
          "Nesterov momentum needs momentum > 0 and dampening == 0, got momentum " + num(options.momentum) +
              ", dampening " + num(options.dampening));
}

std::vector<std::string> SGD::state_slots() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::update(Tensor& param, const Tensor& grad, ParamState& state, bool decay) {
  const SGDOptions& o = options_;
  const bool first = o.momentum != 0 && !state.momentum_buffer.defined();
  if (first) state.momentum_buffer = Tensor(param.shape(), param.dtype());
  dispatch(param.dtype(), [&]<typename T>(T) {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* buf = o.momentum != 0 ? state.momentum_buffer.data<T>() : nullptr;
    const bool decayed = decay && o.weight_decay != 0;
    const T wd = static_cast<T>(o.weight_decay);
    const T mom = static_cast<T>(o.momentum);
    const T keep = static_cast<T>(1 - o.dampening);
    const T neg_lr = static_cast<T>(-lr());
    for (int64_t i = 0; i < param.numel(); ++i) {
      T d = g[i];
      if (decayed) d = d + wd * p[i];
      if (buf != nullptr) {
        buf[i] = first ? d : buf[i] * mom + keep * d;
        d = o.nesterov ? d + mom * buf[i] : buf[i];
      }
      p[i] = p[i] + neg_lr * d;
    }
  });
}

// ---- Adam, AdamW ----

Adam::Adam(NamedVariables params, const AdamOptions& options) : Adam(std::move(params), options, "Adam") {}

Adam::Adam(NamedVariables params, const AdamOptions& options, const char* kind)
    : Optimizer(std::move(params), options.lr, kind, options.no_decay), options_(options) {
  require(std::isfinite(options.eps) && options.eps >= 0, kind, "invalid eps " + num(options.eps));
  require(options.beta1 >= 0 && options.beta1 < 1, kind, "invalid beta1 " + num(options.beta1) + " (need 0 <= beta1 < 1)");
  require(options.beta2 >= 0 && options.beta2 < 1, kind, "invalid beta2 " + num(options.beta2) + " (need 0 <= beta2 < 1)");
  require(std::isfinite(options.weight_decay) && options.weight_decay >= 0, kind,
          "invalid weight_decay " + num(options.weight_decay));
}

AdamW::AdamW(NamedVariables params, const AdamWOptions& o)
    : Adam(std::move(params), AdamOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.no_decay}, "AdamW") {
  decoupled_ = true;
}

void Adam::update(Tensor& param, const Tensor& grad, ParamState& state, bool decay) {
  const AdamOptions& o = options_;
  if (!state.exp_avg.defined()) {
    state.exp_avg = zeros(param.shape(), param.dtype());
    state.exp_avg_sq = zeros(param.shape(), param.dtype());
  }
  // Scalars in double, as PyTorch computes them in Python floats, then cast once.
  const double t = static_cast<double>(state.step);
  const double bias_correction1 = 1 - std::pow(o.beta1, t);
  const double bias_correction2 = 1 - std::pow(o.beta2, t);
  const double step_size = lr() / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  dispatch(param.dtype(), [&]<typename T>(T) {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m = state.exp_avg.data<T>();
    T* v = state.exp_avg_sq.data<T>();
    const T wd = static_cast<T>(o.weight_decay);
    const T shrink = static_cast<T>(1 - lr() * o.weight_decay);  // decoupled decay: p *= shrink
    const T b1 = static_cast<T>(o.beta1), one_minus_b1 = static_cast<T>(1 - o.beta1);
    const T b2 = static_cast<T>(o.beta2), one_minus_b2 = static_cast<T>(1 - o.beta2);
    const T bc2_sqrt = static_cast<T>(bias_correction2_sqrt);
    const T eps = static_cast<T>(o.eps);
    const T neg_step = static_cast<T>(-step_size);
    const bool decay_param = decay && decoupled_ && o.weight_decay != 0;
    const bool decay_grad = decay && !decoupled_ && o.weight_decay != 0;
    // Elements are independent: big parameters are split over the pool (same bits for any
    // split), and the loop has no branch inside so that it vectorises.
    const int64_t n = param.numel();
    parallel_for(n, parallel_chunks(n, 12.0 * static_cast<double>(n)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T pi = decay_param ? p[i] * shrink : p[i];
        const T gi = decay_grad ? g[i] + wd * p[i] : g[i];
        m[i] = m[i] * b1 + one_minus_b1 * gi;
        v[i] = v[i] * b2 + one_minus_b2 * gi * gi;
        const T denom = std::sqrt(v[i]) / bc2_sqrt + eps;
        p[i] = pi + neg_step * (m[i] / denom);
      }
    });
  });
}

}  // namespace ag
