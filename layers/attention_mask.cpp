#include "attograd/layers/attention_mask.h"

#include <cmath>
#include <stdexcept>

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
