#include "attograd/layers/positional.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/autograd/ops.h"
#include "attograd/core/format.h"

namespace ag {

constexpr Named<PositionalKind> kPositionalNames[] = {{PositionalKind::learned, "learned"},
                                                      {PositionalKind::sinusoidal, "sinusoidal"}};

const char* positional_kind_name(PositionalKind kind) { return name_of(kPositionalNames, kind); }

PositionalKind parse_positional_kind(const std::string& name) {
  return named(kPositionalNames, name, "positional embedding");
}

namespace {

// x must be (T, d_model) or (B, T, d_model) with T <= max_len.
void check_sequence(const std::string& layer, const Variable& x, int64_t d_model, int64_t max_len) {
  if ((x.dim() != 2 && x.dim() != 3) || x.shape()[-1] != d_model || x.shape()[-2] > max_len) {
    throw std::invalid_argument(layer + ": input of shape " + x.shape().str() +
                                " must be (B, T, d_model) or (T, d_model) with d_model=" + std::to_string(d_model) +
                                " and T <= max_len=" + std::to_string(max_len));
  }
}

// pe: (max_len, d_model); an odd d_model drops the last cosine column.
Tensor sinusoid_table(const PositionalEncodingOptions& options) {
  if (options.d_model <= 0 || options.max_len <= 0 || !(options.base > 1.0)) {
    throw std::invalid_argument("SinusoidalPositionalEncoding: d_model and max_len must be positive and base > 1, got "
                                "d_model=" + std::to_string(options.d_model) + " max_len=" +
                                std::to_string(options.max_len) + " base=" + std::to_string(options.base));
  }
  const int64_t d = options.d_model;
  std::vector<double> table(static_cast<size_t>(options.max_len * d));
  for (int64_t t = 0; t < options.max_len; ++t) {
    for (int64_t i = 0; 2 * i < d; ++i) {
      const double exponent = -static_cast<double>(2 * i) / static_cast<double>(d);
      const double angle = static_cast<double>(t) * std::pow(options.base, exponent);
      table[static_cast<size_t>(t * d + 2 * i)] = std::sin(angle);
      if (2 * i + 1 < d) table[static_cast<size_t>(t * d + 2 * i + 1)] = std::cos(angle);
    }
  }
  return from_vector(table, {options.max_len, d});
}

}  // namespace

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(const PositionalEncodingOptions& options)
    : options_(options), pe_(register_buffer("pe", sinusoid_table(options))) {}

Tensor SinusoidalPositionalEncoding::encoding(int64_t length) const {
  if (length < 0 || length > options_.max_len) {
    throw std::invalid_argument("SinusoidalPositionalEncoding: length " + std::to_string(length) +
                                " is outside [0, max_len=" + std::to_string(options_.max_len) + "]");
  }
  return pe_.narrow(0, 0, length);
}

Variable SinusoidalPositionalEncoding::forward(const Variable& x) {
  check_sequence(name(), x, options_.d_model, options_.max_len);
  if (x.dtype() != pe_.dtype()) {
    throw std::invalid_argument(name() + ": input " + x.shape().str() + " has dtype " + dtype_name(x.dtype()) +
                                " but the table is " + dtype_name(pe_.dtype()) + " (convert the module with to())");
  }
  // (T, d_model) broadcasts over the batch.
  return x + Variable(encoding(x.shape()[-2]));
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(const LearnedPositionalEmbeddingOptions& options)
    : options_(options) {
  if (options.max_len <= 0 || options.d_model <= 0) {
    throw std::invalid_argument("LearnedPositionalEmbedding: max_len and d_model must be positive, got max_len=" +
                                std::to_string(options.max_len) + " d_model=" + std::to_string(options.d_model));
  }
  weight_ = register_parameter("weight", normal({options.max_len, options.d_model}, 0.0, 1.0));
}

Variable LearnedPositionalEmbedding::forward(const Variable& x) {
  check_sequence(name(), x, options_.d_model, options_.max_len);
  require_dtype(x, weight_.dtype(), "input");
  return x + narrow(weight_, 0, 0, x.shape()[-2]);
}

}  // namespace ag
