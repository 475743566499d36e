// RotaryEmbedding: rotary position embedding (RoPE) as a layer without parameters. It turns
// the head vectors of queries and keys by angles that grow with the position, so that the score
// of query position p and key position s depends on p - s only (the op: rotary_embedding in
// autograd/nn_ops.h, Hugging Face's "rotate half" layout).
//   x: (B, T, H, head_dim) at positions offset .. offset + T - 1 -> same shape
// The angle of pair i (i < head_dim / 2) at position p is p * inv_freq[i], with
//   inv_freq[i] = theta^(-2i / head_dim)                      (rope_theta, 10000 in Llama 2)
// and with Llama 3's "llama3" scaling (rope_scaling in a config.json), frequencies whose wave
// is longer than original_max_position_embeddings / low_freq_factor are divided by `factor`,
// those shorter than original / high_freq_factor are kept, and the ones between are blended:
//   smooth = (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
//   inv_freq = (1 - smooth) * inv_freq / factor + smooth * inv_freq
//
// The cos / sin tables are computed in double and kept per dtype, for the positions used so far
// (grown by doubling up to max_positions, so a model of a long context trained on short
// sequences holds short tables). They are not parameters or buffers (a Hugging Face checkpoint
// has none either), so state_dict() is empty. A position outside [0, max_positions) is refused
// naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/layers/module.h"

namespace ag {

struct RopeScaling {
  enum class Kind { none, llama3 };
  Kind kind = Kind::none;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct RotaryOptions {
  int64_t head_dim = 0;       // even
  int64_t max_positions = 0;  // the tables' rows
  double theta = 10000.0;
  RopeScaling scaling;
};

// inv_freq of the options (head_dim / 2 values), in double; std::invalid_argument naming the
// option when head_dim is odd or not positive, theta <= 1, or the scaling's numbers are unusable.
std::vector<double> rotary_inverse_frequencies(const RotaryOptions& options);

class RotaryEmbedding : public Module {
 public:
  explicit RotaryEmbedding(const RotaryOptions& options);

  // x: (B, T, H, head_dim) -> the same, position of row t = offset + t.
  Variable forward(const Variable& x, int64_t offset = 0);
  Variable operator()(const Variable& x, int64_t offset = 0) { return forward(x, offset); }
  const RotaryOptions& options() const { return options_; }
  const std::vector<double>& inverse_frequencies() const { return inv_freq_; }
  // The tables in `dtype` for at least `positions` positions: (rows >= positions, head_dim / 2).
  const Tensor& cos(DType dtype, int64_t positions);
  const Tensor& sin(DType dtype, int64_t positions);
  std::string name() const override;

 private:
  struct Tables {
    Tensor cos, sin;
  };
  Tables& tables(DType dtype, int64_t positions);

  RotaryOptions options_;
  std::vector<double> inv_freq_;
  Tables f32_, f64_;
};

}  // namespace ag
