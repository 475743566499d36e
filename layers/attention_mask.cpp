#include "attograd/layers/attention_mask.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "attograd/core/kernels.h"

namespace ag {

namespace {

// Right-aligns a shape of rank <= 4 against (B, H, Tq, Tk) by prepending ones.
Shape as_rank4(const Shape& s, const char* op) {
  if (s.rank() > 4) {
    throw std::invalid_argument(std::string(op) + ": tensor of shape " + s.str() +
                                " has more than 4 dimensions; attention masks broadcast to (B, H, Tq, Tk)");
  }
  std::vector<int64_t> dims(static_cast<size_t>(4 - s.rank()), 1);
  dims.insert(dims.end(), s.begin(), s.end());
  return Shape(dims);
}

void check_broadcast(const char* op, const std::string& what, const Shape& shape, int64_t B, int64_t H, int64_t Tq,
                     int64_t Tk) {
  const Shape target{B, H, Tq, Tk};
  if (!broadcastable_to(shape, target)) {
    throw std::invalid_argument(std::string(op) + ": " + what + " of shape " + shape.str() +
                                " does not broadcast to the attention scores (B, H, Tq, Tk) = " + target.str());
  }
}

}  // namespace

AttentionMask::AttentionMask(Tensor keep, std::string description)
    : keep_(std::move(keep)), description_(std::move(description)) {}

AttentionMask AttentionMask::causal(int64_t T) {
  if (T <= 0) throw std::invalid_argument("AttentionMask::causal: T must be positive, got " + std::to_string(T));
  Tensor k = zeros({1, 1, T, T});
  float* p = k.data<float>();
  for (int64_t q = 0; q < T; ++q) {
    for (int64_t j = 0; j <= q; ++j) p[q * T + j] = 1.0f;
  }
  return AttentionMask(std::move(k), "causal(" + std::to_string(T) + ")");
}

AttentionMask AttentionMask::key_padding(const std::vector<int64_t>& lengths, int64_t Tk) {
  const int64_t B = static_cast<int64_t>(lengths.size());
  if (B == 0 || Tk <= 0) {
    throw std::invalid_argument("AttentionMask::key_padding: needs at least one length and Tk > 0, got " +
                                std::to_string(B) + " lengths and Tk=" + std::to_string(Tk));
  }
  Tensor k = zeros({B, 1, 1, Tk});
  float* p = k.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[static_cast<size_t>(b)];
    if (n < 0 || n > Tk) {
      throw std::invalid_argument("AttentionMask::key_padding: length " + std::to_string(n) + " of batch element " +
                                  std::to_string(b) + " is outside [0, Tk=" + std::to_string(Tk) + "]");
    }
    for (int64_t j = 0; j < n; ++j) p[b * Tk + j] = 1.0f;
  }
  return AttentionMask(std::move(k), "key_padding(B=" + std::to_string(B) + ", Tk=" + std::to_string(Tk) + ")");
}

AttentionMask AttentionMask::key_padding(const Indices& lengths, int64_t Tk) {
  if (lengths.shape.rank() != 1) {
    throw std::invalid_argument("AttentionMask::key_padding: lengths must have shape (B), got " + lengths.shape.str());
  }
  return key_padding(lengths.data, Tk);
}

AttentionMask AttentionMask::keep(const Tensor& keep) {
  if (!keep.defined()) throw std::invalid_argument("AttentionMask::keep: the tensor is undefined");
  const Shape shape = as_rank4(keep.shape(), "AttentionMask::keep");
  const std::vector<double> values = keep.to_vector();
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != 0.0 && values[i] != 1.0) {
      std::ostringstream os;
      os << "AttentionMask::keep: values must be 0 (hidden) or 1 (seen); found " << values[i] << " at flat index " << i
         << " of a tensor of shape " << keep.shape();
      throw std::invalid_argument(os.str());
    }
  }
  return AttentionMask(keep.to(DType::f32).reshape(shape).contiguous(), "keep" + keep.shape().str());
}

AttentionMask operator&(const AttentionMask& a, const AttentionMask& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  const std::string both = a.description_ + " & " + b.description_;
  const std::string op = "AttentionMask: " + both;
  broadcast_shapes(a.keep_.shape(), b.keep_.shape(), op.c_str());  // throws naming both masks and shapes
  return AttentionMask(kernels::mul(a.keep_, b.keep_), both);
}

void AttentionMask::check(const char* op, int64_t B, int64_t H, int64_t Tq, int64_t Tk) const {
  if (!empty()) check_broadcast(op, "mask " + description_, keep_.shape(), B, H, Tq, Tk);
}

Tensor AttentionMask::rows_with_keys() const {
  if (empty()) return Tensor();
  const Tensor rows = kernels::amax(keep_, {1, 3}, /*keepdim=*/true);
  const float* p = rows.data<float>();
  for (int64_t i = 0; i < rows.numel(); ++i) {
    if (p[i] == 0.0f) return rows;
  }
  return Tensor();
}

AttentionBias::AttentionBias(Variable bias) : bias_(std::move(bias)) {
  if (!bias_.defined()) throw std::invalid_argument("AttentionBias: the variable is undefined");
  as_rank4(bias_.shape(), "AttentionBias");
  for (double v : bias_.value().to_vector()) {
    if (!std::isfinite(v)) {
      throw std::invalid_argument("AttentionBias: bias of shape " + bias_.shape().str() +
                                  " holds a non-finite value; hide keys with an AttentionMask instead of -inf");
    }
  }
}

void AttentionBias::check(const char* op, int64_t B, int64_t H, int64_t Tq, int64_t Tk) const {
  if (!empty()) check_broadcast(op, "bias", bias_.shape(), B, H, Tq, Tk);
}

}  // namespace ag
