#include "attograd/layers/attention.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"

namespace ag {

namespace {

void check_scale_options(const char* layer, double scale, double temperature, double dropout) {
  const bool bad_scale = !(scale >= 0.0) || !std::isfinite(scale);
  const bool bad_temperature = !(temperature >= 0.0) || !std::isfinite(temperature);
  if (bad_scale || bad_temperature || (scale > 0.0 && temperature > 0.0) || !(dropout >= 0.0 && dropout <= 1.0)) {
    std::ostringstream os;
    os << layer << ": needs scale >= 0 and temperature >= 0 (at most one of them set) and dropout in [0, 1], got scale "
       << scale << " temperature " << temperature << " dropout " << dropout;
    throw std::invalid_argument(os.str());
  }
}

// The bias in the dtype of the scores: a constant converts, a trained bias must already match.
Variable bias_as(const AttentionBias& bias, DType dtype, const std::string& layer) {
  if (bias.empty()) return Variable();
  const Variable& b = bias.variable();
  if (b.dtype() == dtype) return b;
  if (b.requires_grad()) {
    throw std::invalid_argument(layer + ": the trained bias " + b.shape().str() + " has dtype " +
                                dtype_name(b.dtype()) +
                                " but the scores are " + dtype_name(dtype));
  }
  return Variable(b.value().to(dtype));
}

MultiHeadAttentionOptions resolved(MultiHeadAttentionOptions o) {
  if (o.d_model <= 0 || o.n_head <= 0) {
    throw std::invalid_argument("MultiHeadAttention: d_model and n_head must be positive, got d_model=" +
                                std::to_string(o.d_model) + " n_head=" + std::to_string(o.n_head));
  }
  if ((o.d_k == 0 || o.d_v == 0) && o.d_model % o.n_head != 0) {
    throw std::invalid_argument("MultiHeadAttention: d_model=" + std::to_string(o.d_model) +
                                " is not divisible by n_head=" + std::to_string(o.n_head) +
                                "; set d_k and d_v per head explicitly");
  }
  const auto or_default = [](int64_t v, int64_t fallback) { return v == 0 ? fallback : v; };
  o.d_k = or_default(o.d_k, o.d_model / o.n_head);
  o.d_v = or_default(o.d_v, o.d_model / o.n_head);
  o.q_dim = or_default(o.q_dim, o.d_model);
  o.k_dim = or_default(o.k_dim, o.d_model);
  o.v_dim = or_default(o.v_dim, o.d_model);
  if (o.d_k <= 0 || o.d_v <= 0 || o.q_dim <= 0 || o.k_dim <= 0 || o.v_dim <= 0) {
    throw std::invalid_argument("MultiHeadAttention: sizes must be positive, got d_k=" + std::to_string(o.d_k) +
                                " d_v=" + std::to_string(o.d_v) + " q_dim=" + std::to_string(o.q_dim) +
                                " k_dim=" + std::to_string(o.k_dim) + " v_dim=" + std::to_string(o.v_dim));
  }
  check_scale_options("MultiHeadAttention", o.scale, o.temperature, o.dropout);
  return o;
}

std::unique_ptr<Linear> projection(int64_t in, int64_t out, bool bias) {
  return std::make_unique<Linear>(LinearOptions{in, out, bias});
}

}  // namespace

// ---- ScaledDotProductAttention ----

ScaledDotProductAttention::ScaledDotProductAttention(const ScaledDotProductAttentionOptions& options)
    : options_(options) {
  check_scale_options("ScaledDotProductAttention", options.scale, options.temperature, options.dropout);
}

double ScaledDotProductAttention::scale_for(int64_t d_k) const {
  if (options_.scale > 0.0) return options_.scale;
  if (options_.temperature > 0.0) return 1.0 / options_.temperature;
  return 1.0 / std::sqrt(static_cast<double>(d_k));
}

std::string ScaledDotProductAttention::name() const {
  std::ostringstream os;
  os << "ScaledDotProductAttention";
  if (options_.scale > 0.0) os << "(scale=" << options_.scale << ")";
  if (options_.temperature > 0.0) os << "(temperature=" << options_.temperature << ")";
  if (options_.dropout > 0.0) os << "(dropout=" << options_.dropout << ")";
  return os.str();
}

AttentionOutput ScaledDotProductAttention::forward(const Variable& q, const Variable& k, const Variable& v,
                                                   const AttentionMask& mask, const AttentionBias& bias) {
  check_attention_operands(q.value(), k.value(), v.value(), "ScaledDotProductAttention");
  // The mask and bias go to the op as they are: it checks them once, naming every shape.
  AttentionOptions op;
  op.scale = scale_for(q.shape()[3]);
  op.dropout = options_.dropout;
  op.training = is_training();
  AttentionResult r = scaled_dot_product_attention(q, k, v, mask, bias_as(bias, q.dtype(), name()), op);
  return {std::move(r.output), std::move(r.weights)};
}

// ---- MultiHeadAttention ----

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options)
    : options_(resolved(options)),
      w_q_(register_replaceable("w_q", projection(options_.q_dim, options_.n_head * options_.d_k, options_.bias))),
      w_k_(register_replaceable("w_k", projection(options_.k_dim, options_.n_head * options_.d_k, options_.bias))),
      w_v_(register_replaceable("w_v", projection(options_.v_dim, options_.n_head * options_.d_v, options_.bias))),
      w_o_(register_replaceable("w_o", projection(options_.n_head * options_.d_v, options_.d_model, options_.bias))),
      attention_(register_module("attention", std::make_unique<ScaledDotProductAttention>(
                                                  ScaledDotProductAttentionOptions{options_.scale, options_.temperature,
                                                                                   options_.dropout}))) {}

Variable MultiHeadAttention::split_heads(const Variable& x, int64_t d) const {
  return permute(reshape(x, {x.shape()[0], x.shape()[1], options_.n_head, d}), {0, 2, 1, 3});
}

AttentionOutput MultiHeadAttention::forward(const Variable& query, const Variable& key, const Variable& value,
                                            const AttentionMask& mask, const AttentionBias& bias, bool need_weights,
                                            const KvCacheLayer& cache) {
  const MultiHeadAttentionOptions& o = options_;
  const bool ranks = query.dim() == 3 && key.dim() == 3 && value.dim() == 3;
  if (!ranks || query.shape()[-1] != o.q_dim || key.shape()[-1] != o.k_dim || value.shape()[-1] != o.v_dim ||
      query.shape()[0] != key.shape()[0] || key.shape()[0] != value.shape()[0] || key.shape()[1] != value.shape()[1]) {
    throw std::invalid_argument("MultiHeadAttention: expected query (B, Tq, " + std::to_string(o.q_dim) +
                                "), key (B, Tk, " + std::to_string(o.k_dim) + "), value (B, Tk, " +
                                std::to_string(o.v_dim) + "), got query=" + query.shape().str() +
                                " key=" + key.shape().str() + " value=" + value.shape().str());
  }
  const int64_t B = query.shape()[0], Tq = query.shape()[1];
  const int64_t Tk = cache.empty() ? key.shape()[1] : cached_key_count(cache, query, key);
  mask.check("MultiHeadAttention", B, o.n_head, Tq, Tk);
  bias.check("MultiHeadAttention", B, o.n_head, Tq, Tk);

  const Variable q = split_heads(w_q_->forward(query), o.d_k);  // (B, H, Tq, d_k)
  // (B, H, Tk, d_k) and (B, H, Tk, d_v); with a cache, views of it (attention_cache.cpp).
  const auto [k, v] = cache.empty() ? std::pair{split_heads(w_k_->forward(key), o.d_k), split_heads(w_v_->forward(value), o.d_v)}
                                    : cached_keys_values(cache, key, value);
  AttentionOutput r = attention_(q, k, v, mask, bias);
  // (B, H, Tq, d_v) -> (B, Tq, H * d_v): heads side by side, as w_o expects them.
  const Variable heads = reshape(permute(r.output, {0, 2, 1, 3}), {B, Tq, o.n_head * o.d_v});
  Variable out = w_o_->forward(heads);
  // A query that sees nothing gets nothing, not the output projection's bias.
  const Tensor rows = mask.rows_with_keys();  // (b, 1, q, 1)
  if (rows.defined()) {
    out = out * Variable(rows.reshape({rows.shape()[0], rows.shape()[2], 1}).to(out.dtype()));
  }
  if (!need_weights) r.weights = Tensor();
  return {out, r.weights};
}

}  // namespace ag
