#include "attograd/autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/core/rng.h"

namespace ag {

namespace {

struct Leaf {
  Variable var;
  std::string label;  // for reports: "input 0 'x' (2, 3)"
  bool zero_ok = false;
};

// Storage offset (relative to data<double>()) of the element with row-major flat index i.
int64_t element_offset(const Tensor& t, int64_t i) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t n = t.shape()[d];
    off += (i % n) * t.strides()[static_cast<size_t>(d)];
    i /= n;
  }
  return off;
}

std::string fmt(double v) {
  std::ostringstream os;
  os << std::setprecision(10) << v;
  return os.str();
}

class Checker {
 public:
  Checker(const GradcheckFn& fn, const std::vector<Variable>& inputs, const GradcheckOptions& opt)
      : fn_(fn), inputs_(inputs), opt_(opt), rng_(default_generator().state()) {}

  GradcheckResult run();

 private:
  // f(x) with the generator rewound, so every evaluation draws the same random numbers.
  Variable eval() {
    default_generator().set_state(rng_);
    Variable y = fn_(inputs_);
    if (!y.defined()) throw std::invalid_argument("gradcheck: the function returned an undefined variable");
    if (y.dtype() != DType::f64) {
      throw std::invalid_argument(std::string("gradcheck: the function's output has dtype ") + dtype_name(y.dtype()) +
                                  "; gradient checks run in f64");
    }
    return y;
  }
  // <u, f(x)> without a graph.
  double projected(const Tensor& u) {
    NoGradGuard no_grad;
    const Tensor y = eval().value().contiguous();
    const double* py = y.data<double>();
    const double* pu = u.data<double>();
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += py[i] * pu[i];
    return s;
  }
  void clear_grads() {
    for (Leaf& l : leaves_) l.var.zero_grad();
  }
  // Leaf gradients after one backward with cotangent u (zeros where no gradient arrived).
  std::vector<Tensor> analytic(const Tensor& u) {
    clear_grads();
    Variable y = eval();
    if (!y.requires_grad()) throw std::invalid_argument("gradcheck: the output does not depend on any checked input");
    y.backward(u);
    return collect_grads();
  }
  std::vector<Tensor> collect_grads() {
    std::vector<Tensor> out;
    for (Leaf& l : leaves_) {
      out.push_back(l.var.grad().defined() ? l.var.grad().contiguous() : zeros(l.var.shape(), DType::f64));
    }
    return out;
  }
  double step_for(double x) const { return opt_.eps * std::max(1.0, std::abs(x)); }

  void compare(const Leaf& leaf, const std::string& where, double numeric, double analytic_value) {
    ++result_.comparisons;
    const double err = std::abs(numeric - analytic_value);
    result_.max_abs_error = std::max(result_.max_abs_error, err);
    // Relative to gradients above atol only: a numeric value that is rounding noise (a gradient
    // that is zero by symmetry) would otherwise report a relative error of 1.
    if (std::abs(numeric) > opt_.atol) result_.max_rel_error = std::max(result_.max_rel_error, err / std::abs(numeric));
    if (!(err <= opt_.atol + opt_.rtol * std::abs(numeric))) {
      fail(leaf.label + " " + where + ": numeric " + fmt(numeric) + " analytic " + fmt(analytic_value) + " |diff| " +
           fmt(err) + " > atol " + fmt(opt_.atol) + " + rtol " + fmt(opt_.rtol) + " * |numeric|");
    }
  }
  void fail(const std::string& line) {
    result_.ok = false;
    if (++failures_ <= 20) result_.report += line + "\n";
  }

  void check_full(const Shape& out_shape);
  void check_projections(const Shape& out_shape);
  void check_zero(const std::vector<double>& max_numeric, const std::vector<double>& max_analytic);
  void check_accumulation(const Shape& out_shape);

  const GradcheckFn& fn_;
  std::vector<Variable> inputs_;
  const GradcheckOptions& opt_;
  GeneratorState rng_;
  std::vector<Leaf> leaves_;
  GradcheckResult result_;
  int failures_ = 0;
};

GradcheckResult Checker::run() {
  const auto add_leaf = [&](const Variable& v, const std::string& kind, size_t i) {
    const std::string label = kind + " " + std::to_string(i) + (v.name().empty() ? "" : " '" + v.name() + "'") + " " +
                              v.shape().str();
    if (v.dtype() != DType::f64) {
      throw std::invalid_argument("gradcheck: " + label + " has dtype " + dtype_name(v.dtype()) +
                                  "; gradient checks run in f64 (convert with .to(DType::f64))");
    }
    if (!v.is_leaf()) throw std::invalid_argument("gradcheck: " + label + " is not a leaf (it was made by an op)");
    for (int64_t d = 0; d < v.dim(); ++d) {
      if (v.value().strides()[static_cast<size_t>(d)] == 0 && v.shape()[d] > 1) {
        throw std::invalid_argument("gradcheck: " + label +
                                    " has overlapping memory (an expanded view); pass a tensor that owns its elements");
      }
    }
    bool zero_ok = false;
    for (const Variable& z : opt_.zero_ok) zero_ok = zero_ok || z.id() == v.id();
    leaves_.push_back({v, label, zero_ok});
  };
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!inputs_[i].defined()) throw std::invalid_argument("gradcheck: input " + std::to_string(i) + " is undefined");
    if (inputs_[i].requires_grad()) add_leaf(inputs_[i], "input", i);
  }
  for (size_t i = 0; i < opt_.params.size(); ++i) {
    if (!opt_.params[i].requires_grad()) {
      throw std::invalid_argument("gradcheck: param " + std::to_string(i) + " '" + opt_.params[i].name() +
                                  "' does not require grad");
    }
    add_leaf(opt_.params[i], "param", i);
  }
  if (leaves_.empty()) throw std::invalid_argument("gradcheck: no input or parameter requires grad");

  // Keep the caller's gradients: the check uses the .grad slots as scratch.
  std::vector<Tensor> saved;
  for (Leaf& l : leaves_) saved.push_back(l.var.grad());

  Shape out_shape;
  {
    NoGradGuard no_grad;
    out_shape = eval().shape();
  }
  int64_t total_in = 0;
  for (const Leaf& l : leaves_) total_in += l.var.numel();
  result_.full_jacobian = total_in <= opt_.max_full_inputs && out_shape.numel() <= opt_.max_full_outputs;
  if (result_.full_jacobian) check_full(out_shape);
  else check_projections(out_shape);
  if (opt_.check_accumulation) check_accumulation(out_shape);

  for (size_t i = 0; i < leaves_.size(); ++i) leaves_[i].var.set_grad(saved[i]);
  default_generator().set_state(rng_);
  return result_;
}

void Checker::check_full(const Shape& out_shape) {
  const int64_t n_out = out_shape.numel();
  // Analytic Jacobian: one backward per output element through one retained graph.
  std::vector<std::vector<Tensor>> rows;  // rows[k][leaf]
  {
    clear_grads();
    Variable y = eval();
    if (!y.requires_grad()) throw std::invalid_argument("gradcheck: the output does not depend on any checked input");
    for (int64_t k = 0; k < n_out; ++k) {
      clear_grads();
      Tensor e = zeros(out_shape, DType::f64);
      e.data<double>()[k] = 1.0;
      y.backward(e, /*retain_graph=*/true);
      rows.push_back(collect_grads());
    }
    clear_grads();
  }
  std::vector<double> max_numeric(leaves_.size(), 0.0), max_analytic(leaves_.size(), 0.0);
  for (size_t j = 0; j < leaves_.size(); ++j) {
    Tensor& x = leaves_[j].var.mutable_value();
    double* base = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double& xi = base[element_offset(x, i)];
      const double orig = xi;
      const double h = step_for(orig);
      NoGradGuard no_grad;
      // clone, not contiguous: an output that is the input itself (or a view of it) would
      // otherwise change under the next perturbation.
      xi = orig + h;
      const Tensor plus = eval().value().clone();
      xi = orig - h;
      const Tensor minus = eval().value().clone();
      xi = orig;
      const double* pp = plus.data<double>();
      const double* pm = minus.data<double>();
      for (int64_t k = 0; k < n_out; ++k) {
        const double numeric = (pp[k] - pm[k]) / (2 * h);
        const double a = rows[static_cast<size_t>(k)][j].data<double>()[i];
        max_numeric[j] = std::max(max_numeric[j], std::abs(numeric));
        max_analytic[j] = std::max(max_analytic[j], std::abs(a));
        compare(leaves_[j], "element " + index_str(x.shape(), i) + " output " + index_str(out_shape, k), numeric, a);
      }
    }
  }
  check_zero(max_numeric, max_analytic);
}

void Checker::check_projections(const Shape& out_shape) {
  Generator gen(opt_.seed);
  std::vector<double> max_numeric(leaves_.size(), 0.0), max_analytic(leaves_.size(), 0.0);
  for (int p = 0; p < opt_.projections; ++p) {
    const Tensor u = normal(out_shape, 0.0, 1.0, gen, DType::f64);
    const std::vector<Tensor> grads = analytic(u);
    clear_grads();
    for (size_t j = 0; j < leaves_.size(); ++j) {
      Tensor& x = leaves_[j].var.mutable_value();
      const Tensor v = normal(x.shape(), 0.0, 1.0, gen, DType::f64);
      const double* pv = v.data<double>();
      double* base = x.data<double>();
      double scale = 1.0, a = 0.0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        scale = std::max(scale, std::abs(base[element_offset(x, i)]));
        a += grads[j].data<double>()[i] * pv[i];
      }
      const double h = opt_.eps * scale;
      const Tensor orig = x.clone();
      const auto shift = [&](double k) {
        for (int64_t i = 0; i < x.numel(); ++i) base[element_offset(x, i)] = orig.data<double>()[i] + k * h * pv[i];
      };
      shift(+1);
      const double plus = projected(u);
      shift(-1);
      const double minus = projected(u);
      shift(0);
      const double numeric = (plus - minus) / (2 * h);
      max_numeric[j] = std::max(max_numeric[j], std::abs(numeric));
      max_analytic[j] = std::max(max_analytic[j], std::abs(a));
      compare(leaves_[j], "projection " + std::to_string(p), numeric, a);
    }
  }
  check_zero(max_numeric, max_analytic);
}

void Checker::check_zero(const std::vector<double>& max_numeric, const std::vector<double>& max_analytic) {
  for (size_t j = 0; j < leaves_.size(); ++j) {
    if (leaves_[j].zero_ok) continue;
    if (max_analytic[j] <= 1e-12 && max_numeric[j] <= opt_.atol) {
      fail(leaves_[j].label + ": the gradient is identically zero both analytically and numerically; the check " +
           "cannot fail (pick inputs that reach it, or list the variable in zero_ok)");
    }
  }
}

void Checker::check_accumulation(const Shape& out_shape) {
  Generator gen(opt_.seed + 1);
  const Tensor u = normal(out_shape, 0.0, 1.0, gen, DType::f64);
  const std::vector<Tensor> fresh = analytic(u);
  std::vector<Tensor> prefill;
  for (Leaf& l : leaves_) {
    prefill.push_back(normal(l.var.shape(), 0.0, 1.0, gen, DType::f64));
    l.var.set_grad(prefill.back().clone());
  }
  Variable y = eval();
  y.backward(u);
  for (size_t j = 0; j < leaves_.size(); ++j) {
    const Tensor after = leaves_[j].var.grad().contiguous();
    for (int64_t i = 0; i < after.numel(); ++i) {
      const double expected = prefill[j].data<double>()[i] + fresh[j].data<double>()[i];
      const double got = after.data<double>()[i];
      if (!(std::abs(got - expected) <= 1e-9 * (1.0 + std::abs(expected)))) {
        fail(leaves_[j].label + " element " + index_str(after.shape(), i) +
             ": backward did not add to the existing gradient: prefill " + fmt(prefill[j].data<double>()[i]) +
             " + gradient " + fmt(fresh[j].data<double>()[i]) + " != " + fmt(got));
        break;
      }
    }
  }
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Variable>& inputs, const GradcheckOptions& options) {
  Checker checker(fn, inputs, options);
  return checker.run();
}

}  // namespace ag
