#include "attograd/layers/embedding.h"

#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"

namespace ag {

Embedding::Embedding(const EmbeddingOptions& options) : options_(options) {
  const int64_t n = options.num_embeddings;
  if (n <= 0 || options.embedding_dim <= 0) {
    throw std::invalid_argument("Embedding: num_embeddings and embedding_dim must be positive, got " +
                                std::to_string(n) + " and " + std::to_string(options.embedding_dim));
  }
  Shape{n, options.embedding_dim}.checked_numel("Embedding weight");  // before anything is allocated
  if (options.padding_idx) {
    const int64_t p = *options.padding_idx;
    if (p < -n || p >= n) {
      throw std::invalid_argument("Embedding: padding_idx " + std::to_string(p) + " is outside [-" +
                                  std::to_string(n) + ", " + std::to_string(n) + ")");
    }
    padding_row_ = p < 0 ? p + n : p;
  }
  Tensor w = normal({n, options.embedding_dim}, 0.0, 1.0);
  if (padding_row_ >= 0) w.select(0, padding_row_).fill_(0.0);
  weight_ = register_parameter("weight", std::move(w));
}

Variable Embedding::forward(const Indices& ids) {
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (ids[i] < 0 || ids[i] >= options_.num_embeddings) {
      throw std::invalid_argument("Embedding: id " + std::to_string(ids[i]) + " at flat position " + std::to_string(i) +
                                  " of ids " + ids.shape.str() + " is outside [0, " +
                                  std::to_string(options_.num_embeddings) + ")");
    }
  }
  return embedding(weight_, ids, padding_row_);
}

}  // namespace ag
