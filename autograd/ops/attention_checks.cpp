// The checks of scaled_dot_product_attention, apart from its maths (attention.cpp): the op
// checks everything it is given once, here, and its kernels trust that.
// check_attention_operands is shared with the attention layers.
#include <cmath>
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"

namespace ag {

void check_attention_operands(const Tensor& q, const Tensor& k, const Tensor& v, const std::string& op) {
  if (!q.defined() || !k.defined() || !v.defined()) {
    throw std::invalid_argument(op + ": q, k and v must all be defined");
  }
  const std::string shapes = "q=" + q.shape().str() + " k=" + k.shape().str() + " v=" + v.shape().str();
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) {
    throw std::invalid_argument(op + ": q, k and v must be 4-D (B, H, T, D): " + shapes);
  }
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype()) {
    throw std::invalid_argument(op + ": dtypes differ: q=" + dtype_name(q.dtype()) + " k=" +
                                dtype_name(k.dtype()) + " v=" + dtype_name(v.dtype()) + " (" + shapes + ")");
  }
  if (q.shape()[0] != k.shape()[0] || q.shape()[0] != v.shape()[0]) {
    throw std::invalid_argument(op + ": batch dimensions B differ: " + shapes);
  }
  // Grouped-query attention: k and v may have fewer heads, each shared by a group of query heads.
  if (k.shape()[1] != v.shape()[1] || k.shape()[1] == 0 || q.shape()[1] % k.shape()[1] != 0) {
    throw std::invalid_argument(op + ": k and v need the same number of heads, one that divides q's (H = " +
                                std::to_string(q.shape()[1]) + " query heads in groups over H_kv key/value heads): " +
                                shapes);
  }
  if (q.shape()[3] != k.shape()[3]) {
    throw std::invalid_argument(op + ": query and key depths Dk differ: " + shapes);
  }
  if (k.shape()[2] != v.shape()[2]) {
    throw std::invalid_argument(op + ": key and value lengths Tk differ: " + shapes);
  }
}

}  // namespace ag

namespace ag::kernels {

namespace {
constexpr const char* kOp = "scaled_dot_product_attention";

std::string shape_or_undefined(const Tensor& t) { return t.defined() ? t.shape().str() : std::string("undefined"); }
}  // namespace

double check_attention_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                                 const Tensor& bias, const AttentionOptions& options) {
  check_attention_operands(q, k, v, kOp);
  const std::string shapes = " (q=" + q.shape().str() + " k=" + k.shape().str() + " v=" + v.shape().str() + ")";
  const int64_t B = q.shape()[0], H = q.shape()[1], Tq = q.shape()[2], Tk = k.shape()[2], Dk = q.shape()[3];
  const Shape scores{B, H, Tq, Tk};
  if (!mask.empty() && !broadcastable_to(mask.shape(), scores)) {
    throw std::invalid_argument(std::string(kOp) + ": mask " + mask.description() + " of shape " +
                                mask.shape().str() + " does not broadcast to the scores (B, H, Tq, Tk) = " +
                                scores.str() + shapes);
  }
  if (bias.defined()) {
    if (!broadcastable_to(bias.shape(), scores)) {
      throw std::invalid_argument(std::string(kOp) + ": bias " + bias.shape().str() +
                                  " does not broadcast to the scores (B, H, Tq, Tk) = " + scores.str() + shapes);
    }
    if (bias.dtype() != q.dtype()) {
      throw std::invalid_argument(std::string(kOp) + ": bias " + bias.shape().str() + " has dtype " +
                                  dtype_name(bias.dtype()) + " but q has " + dtype_name(q.dtype()));
    }
  }
  check_dropout_probability(options.dropout, kOp);
  if (!(options.scale >= 0.0) || !std::isfinite(options.scale) || (options.scale == 0.0 && Dk == 0)) {
    throw std::invalid_argument(std::string(kOp) + ": scale must be finite and >= 0 (0 means 1 / sqrt(Dk)), got " +
                                std::to_string(options.scale) + " with q=" + q.shape().str());
  }
  return options.scale > 0.0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(Dk));
}

void check_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& row_max, const Tensor& row_sum, bool want_scores_path) {
  const bool operands_ok = q.defined() && k.defined() && (v.defined() || !want_scores_path);
  if (operands_ok) check_attention_operands(q, k, v.defined() ? v : k, std::string(kOp) + "_backward");
  const Shape stats = operands_ok ? Shape{q.shape()[0], q.shape()[1], q.shape()[2]} : Shape();
  const bool ok = operands_ok && g.defined() && g.dim() == 4 && g.shape()[0] == stats[0] &&
                  g.shape()[1] == stats[1] && g.shape()[2] == stats[2] && g.dtype() == q.dtype() &&
                  (!want_scores_path || v.shape()[3] == g.shape()[3]) && row_max.defined() &&
                  row_max.shape() == stats && row_max.dtype() == q.dtype() && row_sum.defined() &&
                  row_sum.shape() == stats && row_sum.dtype() == q.dtype();
  if (!ok) {
    throw std::invalid_argument(std::string(kOp) + "_backward: gradient " + shape_or_undefined(g) +
                                " or saved operands do not fit together: q=" + shape_or_undefined(q) +
                                " k=" + shape_or_undefined(k) + " v=" + shape_or_undefined(v) +
                                " row_max=" + shape_or_undefined(row_max) + " row_sum=" + shape_or_undefined(row_sum));
  }
}

void check_attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& weights, bool want_q, bool want_k, bool want_scores) {
  // Shapes come from whichever operands were saved: q is needed only for dk, k only for dq.
  const bool want_scores_path = want_q || want_k || want_scores;
  // t is (B, H, length, D) with the weights' B and H, or for keys and values (kv) H_kv heads that
  // divide H (grouped-query attention).
  const auto fits = [&](const Tensor& t, int64_t length, bool kv = false) {
    const bool heads_ok = kv ? t.defined() && t.dim() == 4 && t.shape()[1] > 0 && weights.shape()[1] % t.shape()[1] == 0
                             : t.defined() && t.dim() == 4 && t.shape()[1] == weights.shape()[1];
    return heads_ok && t.shape()[0] == weights.shape()[0] && t.shape()[2] == length;
  };
  const bool weights_ok = weights.defined() && weights.dim() == 4;
  if (!weights_ok || !fits(g, weights.shape()[2]) || (want_q && !fits(k, weights.shape()[3], true)) ||
      (want_k && !fits(q, weights.shape()[2])) ||
      (want_scores_path && (!fits(v, weights.shape()[3], true) || v.shape()[3] != g.shape()[3])) ||
      (want_q && want_k && (q.shape()[3] != k.shape()[3] || k.shape()[1] != v.shape()[1]))) {
    throw std::invalid_argument(std::string(kOp) + "_backward: gradient " + shape_or_undefined(g) +
                                " or saved operands do not match the weights " + shape_or_undefined(weights));
  }
}

}  // namespace ag::kernels
