#include "attograd/layers/rotary.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/nn_ops.h"

namespace ag {

std::vector<double> rotary_inverse_frequencies(const RotaryOptions& o) {
  if (o.head_dim <= 0 || o.head_dim % 2 != 0 || !(o.theta > 1.0) || !std::isfinite(o.theta)) {
    std::ostringstream os;
    os << "RotaryEmbedding: needs an even head_dim > 0 and a finite theta > 1, got head_dim=" << o.head_dim
       << " theta=" << o.theta;
    throw std::invalid_argument(os.str());
  }
  const RopeScaling& s = o.scaling;
  if (s.kind == RopeScaling::Kind::llama3 &&
      (!(s.factor >= 1.0) || !std::isfinite(s.factor) || !(s.low_freq_factor > 0.0) ||
       !(s.high_freq_factor > s.low_freq_factor) || !std::isfinite(s.high_freq_factor) ||
       s.original_max_position_embeddings <= 0)) {
    std::ostringstream os;
    os << "RotaryEmbedding: llama3 rope_scaling needs factor >= 1, 0 < low_freq_factor < high_freq_factor and "
          "original_max_position_embeddings > 0, got factor="
       << s.factor << " low_freq_factor=" << s.low_freq_factor << " high_freq_factor=" << s.high_freq_factor
       << " original_max_position_embeddings=" << s.original_max_position_embeddings;
    throw std::invalid_argument(os.str());
  }
  const int64_t half = o.head_dim / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(o.theta, -static_cast<double>(2 * i) / static_cast<double>(o.head_dim));
    switch (s.kind) {
      case RopeScaling::Kind::none: break;
      case RopeScaling::Kind::llama3: {
        const double original = static_cast<double>(s.original_max_position_embeddings);
        const double wavelength = 2.0 * std::numbers::pi / f;
        if (wavelength > original / s.low_freq_factor) {
          f /= s.factor;  // long waves: stretched to the longer context
        } else if (wavelength >= original / s.high_freq_factor) {
          const double smooth = (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          f = (1.0 - smooth) * f / s.factor + smooth * f;
        }
        break;
      }
    }
    inv_freq[static_cast<size_t>(i)] = f;
  }
  return inv_freq;
}

RotaryEmbedding::RotaryEmbedding(const RotaryOptions& options)
    : options_(options), inv_freq_(rotary_inverse_frequencies(options)) {
  if (options.max_positions <= 0) {
    throw std::invalid_argument("RotaryEmbedding: max_positions must be positive, got " +
                                std::to_string(options.max_positions));
  }
}

RotaryEmbedding::Tables& RotaryEmbedding::tables(DType dtype, int64_t positions) {
  if (positions > options_.max_positions) {
    throw std::invalid_argument("RotaryEmbedding: position " + std::to_string(positions - 1) +
                                " is past the last of max_positions=" + std::to_string(options_.max_positions));
  }
  Tables& t = dtype == DType::f64 ? f64_ : f32_;
  if (t.cos.defined() && t.cos.shape()[0] >= positions) return t;
  // Doubling: a decoder that asks for one more position each step rebuilds log(T) times. Earlier
  // tables stay alive as long as a graph that read them does.
  const int64_t rows = std::min(options_.max_positions, std::max({positions, int64_t{64},
                                                                  t.cos.defined() ? 2 * t.cos.shape()[0] : 0}));
  const int64_t half = options_.head_dim / 2;
  Tensor c(Shape{rows, half}, DType::f64), s(Shape{rows, half}, DType::f64);
  double* pc = c.data<double>();
  double* ps = s.data<double>();
  for (int64_t p = 0; p < rows; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * inv_freq_[static_cast<size_t>(i)];
      pc[p * half + i] = std::cos(angle);
      ps[p * half + i] = std::sin(angle);
    }
  }
  t.cos = c.to(dtype);
  t.sin = s.to(dtype);
  return t;
}

const Tensor& RotaryEmbedding::cos(DType dtype, int64_t positions) { return tables(dtype, positions).cos; }
const Tensor& RotaryEmbedding::sin(DType dtype, int64_t positions) { return tables(dtype, positions).sin; }

Variable RotaryEmbedding::forward(const Variable& x, int64_t offset) {
  if (x.dim() != 4 || x.shape()[3] != options_.head_dim) {
    throw std::invalid_argument("RotaryEmbedding: expected x (B, T, H, head_dim=" + std::to_string(options_.head_dim) +
                                "), got " + x.shape().str());
  }
  if (offset < 0) throw std::invalid_argument("RotaryEmbedding: offset must be >= 0, got " + std::to_string(offset));
  const Tables& t = tables(x.dtype(), offset + x.shape()[1]);
  return rotary_embedding(x, t.cos, t.sin, offset);
}

std::string RotaryEmbedding::name() const {
  std::ostringstream os;
  os << "RotaryEmbedding(head_dim=" << options_.head_dim << ", theta=" << options_.theta;
  if (options_.scaling.kind == RopeScaling::Kind::llama3) os << ", llama3 x" << options_.scaling.factor;
  os << ")";
  return os.str();
}

}  // namespace ag
