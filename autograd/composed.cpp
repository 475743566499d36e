#include "attograd/autograd/composed.h"

#include <cmath>
#include <limits>
#include <vector>

#include "attograd/core/kernels.h"
#include "attograd/core/tensor.h"

namespace ag::composed {

namespace {

// The row maxima of x along `axis`, kept as a constant: subtracting them keeps exp finite.
Variable row_max(const Variable& x, int64_t axis) {
  Tensor m = kernels::amax(x.value(), {axis}, true);
  // An all -inf row would give -inf - -inf = NaN; shifting it by 0 keeps the NaN out of the max.
  m = kernels::where(kernels::binary(kernels::BinaryOp::equal, m, full(m.shape(), -std::numeric_limits<double>::infinity(), m.dtype())),
                     zeros(m.shape(), m.dtype()), m);
  return Variable(m);
}

}  // namespace

Variable softmax(const Variable& x, int64_t axis) {
  const Variable e = exp(x - row_max(x, axis));
  return e / sum(e, {axis}, true);
}

Variable log_softmax(const Variable& x, int64_t axis) {
  const Variable shifted = x - row_max(x, axis);
  return shifted - log(sum(exp(shifted), {axis}, true));
}

Variable layer_norm(const Variable& x, const Variable& w, const Variable& b, int64_t dims, double eps) {
  std::vector<int64_t> axes;
  for (int64_t d = x.dim() - dims; d < x.dim(); ++d) axes.push_back(d);
  const Variable centred = x - mean(x, axes, true);
  const Variable var = mean(centred * centred, axes, true);
  Variable y = centred / sqrt(var + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

Variable rms_norm(const Variable& x, const Variable& w, double eps) {
  Variable y = x * pow(mean(x * x, {-1}, true) + eps, -0.5);
  if (w.defined()) y = y * w;
  return y;
}

// The tables' rows offset .. offset + T - 1 as (1, T, 1, D/2) constants, so they broadcast
// over the batch and the heads.
Variable rotary_embedding(const Variable& x, const Tensor& cos, const Tensor& sin, int64_t offset) {
  const int64_t T = x.shape()[1], half = x.shape()[3] / 2;
  const auto rows = [&](const Tensor& table) {
    return Variable(table.narrow(0, offset, T).contiguous().reshape({1, T, 1, half}));
  };
  const Variable c = concat({rows(cos), rows(cos)}, -1), s = concat({rows(sin), rows(sin)}, -1);
  const Variable rotated = concat({neg(slice(x, -1, half, 2 * half)), slice(x, -1, 0, half)}, -1);
  return x * c + rotated * s;
}

Variable swiglu(const Variable& gate, const Variable& up) { return silu(gate) * up; }

// log_softmax, then the target's log-probability picked by a one-hot mask.
Variable cross_entropy(const Variable& logits, const Indices& targets, const CrossEntropyOptions& o) {
  const int64_t classes = logits.shape()[-1];
  Tensor onehot = zeros(logits.shape(), logits.dtype());
  Tensor valid = zeros(targets.shape, logits.dtype());
  Tensor onehot_flat = onehot.view({-1, classes});
  Tensor valid_flat = valid.view({-1});
  int64_t count = 0;
  for (int64_t r = 0; r < targets.numel(); ++r) {
    if (targets[r] == o.ignore_index) continue;
    onehot_flat.set({r, targets[r]}, 1.0);
    valid_flat.set({r}, 1.0);
    ++count;
  }
  const Variable logp = composed::log_softmax(logits, -1);
  const Variable nll = neg(sum(logp * Variable(onehot), {-1}));
  const Variable smooth = neg(mean(logp, {-1}));
  const Variable row = (nll * (1 - o.label_smoothing) + smooth * o.label_smoothing) * Variable(valid);
  switch (o.reduction) {
    case Reduction::none: return row;
    case Reduction::sum: return sum(row);
    case Reduction::mean: return sum(row) / static_cast<double>(count);
  }
  return row;
}

// matmul + masked_fill + softmax (+ dropout) + matmul, from the primitives.
Variable scaled_dot_product_attention(const Variable& q, const Variable& k_in, const Variable& v_in,
                                      const AttentionMask& mask, const Variable& bias, const AttentionOptions& o) {
  const Tensor keep = mask.empty() ? Tensor() : mask.keep_tensor().to(q.dtype());
  const double scale = o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(q.shape()[3]));
  // Grouped-query attention: each key/value head serves H / Hkv query heads; here each is
  // copied once per query head (the fused op reads the shared head in place).
  const auto per_query_head = [&](const Variable& t) {
    const int64_t B = t.shape()[0], Hkv = t.shape()[1], groups = q.shape()[1] / Hkv;
    if (groups == 1) return t;
    const Shape spread{B, Hkv, groups, t.shape()[2], t.shape()[3]};
    return reshape(expand(unsqueeze(t, 2), spread), {B, Hkv * groups, t.shape()[2], t.shape()[3]});
  };
  const Variable k = per_query_head(k_in), v = per_query_head(v_in);
  Variable scores = matmul(q, transpose(k, -2, -1)) * scale;
  if (bias.defined()) scores = scores + bias;
  if (keep.defined()) {
    scores = masked_fill(scores, kernels::affine(keep, -1.0, 1.0), -std::numeric_limits<double>::infinity());
  }
  Variable weights = ag::softmax(scores, -1);
  if (o.training && o.dropout > 0) weights = dropout(weights, o.dropout, true);
  return matmul(weights, v);
}

}  // namespace ag::composed
