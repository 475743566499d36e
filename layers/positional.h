// Position information added to a sequence of embeddings.   x: (B, T, d_model) or (T, d_model)
//
// SinusoidalPositionalEncoding ("Attention Is All You Need"): a fixed table kept as the buffer
// `pe` (max_len, d_model), saved in the state_dict but not trained:
//   pe[t, 2i] = sin(t / base^(2i / d_model)),  pe[t, 2i + 1] = cos(t / base^(2i / d_model))
// LearnedPositionalEmbedding: a trained table, the parameter `weight` (max_len, d_model),
// init N(0, 1) like an Embedding over positions.
// Both return x + table[:T] and need T <= max_len.
#pragma once

#include <cstdint>
#include <string>

#include "attograd/layers/module.h"

namespace ag {

// Which position signal a model adds to its token embeddings.
enum class PositionalKind { learned, sinusoidal };
const char* positional_kind_name(PositionalKind kind);  // "learned", "sinusoidal"
// Inverse of positional_kind_name; std::invalid_argument listing the choices otherwise.
PositionalKind parse_positional_kind(const std::string& name);

struct PositionalEncodingOptions {
  int64_t d_model = 0;
  int64_t max_len = 5000;  // the PyTorch tutorial's table size
  double base = 10000.0;
};

class SinusoidalPositionalEncoding : public Module {
 public:
  explicit SinusoidalPositionalEncoding(const PositionalEncodingOptions& options);
  SinusoidalPositionalEncoding(int64_t d_model, int64_t max_len = 5000)
      : SinusoidalPositionalEncoding(PositionalEncodingOptions{d_model, max_len}) {}

  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }
  // The first `length` rows of the table: (length, d_model), a view of the buffer.
  Tensor encoding(int64_t length) const;
  const PositionalEncodingOptions& options() const { return options_; }
  std::string name() const override { return "SinusoidalPositionalEncoding"; }

 private:
  PositionalEncodingOptions options_;
  Tensor& pe_;
};

struct LearnedPositionalEmbeddingOptions {
  int64_t max_len = 0;
  int64_t d_model = 0;
};

class LearnedPositionalEmbedding : public Module {
 public:
  explicit LearnedPositionalEmbedding(const LearnedPositionalEmbeddingOptions& options);
  LearnedPositionalEmbedding(int64_t max_len, int64_t d_model)
      : LearnedPositionalEmbedding(LearnedPositionalEmbeddingOptions{max_len, d_model}) {}

  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }
  const LearnedPositionalEmbeddingOptions& options() const { return options_; }
  const Variable& weight() const { return weight_; }
  std::string name() const override { return "LearnedPositionalEmbedding"; }

 private:
  LearnedPositionalEmbeddingOptions options_;
  Variable weight_;
};

}  // namespace ag
