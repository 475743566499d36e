// Embedding: a lookup table of vectors, PyTorch's nn.Embedding.
//   ids: (...) integer Indices in [0, num_embeddings) -> (..., embedding_dim)
//   weight: (num_embeddings, embedding_dim), init N(0, 1) from default_generator()
// The padding row (if any) starts at zero and never receives a gradient, so it stays zero
// through training unless someone writes to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "attograd/core/indices.h"
#include "attograd/layers/module.h"

namespace ag {

struct EmbeddingOptions {
  int64_t num_embeddings = 0;
  int64_t embedding_dim = 0;
  // Negative values count from the end, as in PyTorch (-1 is the last row).
  std::optional<int64_t> padding_idx;
};

class Embedding : public Module {
 public:
  explicit Embedding(const EmbeddingOptions& options);
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt)
      : Embedding(EmbeddingOptions{num_embeddings, embedding_dim, padding_idx}) {}

  Variable forward(const Indices& ids);
  Variable operator()(const Indices& ids) { return forward(ids); }
  const EmbeddingOptions& options() const { return options_; }
  const Variable& weight() const { return weight_; }
  // The normalised padding row, or -1 when there is none.
  int64_t padding_row() const { return padding_row_; }
  std::string name() const override { return "Embedding"; }

 private:
  EmbeddingOptions options_;
  int64_t padding_row_ = -1;
  Variable weight_;
};

}  // namespace ag
