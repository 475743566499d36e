// embedding: a row gather; backward sums the output gradient's rows per id and adds each sum to
// that id's row of the weight gradient (GradSink::add_rows: in place when the gradient exists,
// so a step touches the rows it used, not the whole table). Only the ids are saved.
//
// The kernels:
// Embedding lookup: a gather of weight rows by id, and its backward, the rows of the output
// gradient summed per id (ids that repeat add up in order; the padding row is skipped).
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"

namespace ag::kernels {

namespace {

std::string position_str(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()));
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % shape[d];
    flat /= shape[d];
  }
  return Shape(std::move(idx)).str();
}

Shape output_shape(const Indices& ids, int64_t dim) {
  Shape s = ids.shape;
  s.push_back(dim);
  return s;
}

}  // namespace

Tensor embedding_forward(const Tensor& weight_in, const Indices& ids, int64_t padding_idx) {
  if (!weight_in.defined()) throw std::invalid_argument("embedding: the weight tensor is undefined");
  if (weight_in.dim() != 2) {
    throw std::invalid_argument("embedding: weight must be (num, dim), got shape " + weight_in.shape().str());
  }
  const int64_t num = weight_in.shape()[0];
  const int64_t dim = weight_in.shape()[1];
  if (padding_idx < -1 || padding_idx >= num) {
    throw std::invalid_argument("embedding: padding_idx " + std::to_string(padding_idx) +
                                " is neither -1 (none) nor a row of the table of " + std::to_string(num) +
                                " rows (weight " + weight_in.shape().str() + ")");
  }
  if (ids.shape.numel() != ids.numel()) {
    throw std::invalid_argument("embedding: ids of shape " + ids.shape.str() + " hold " +
                                std::to_string(ids.numel()) + " values");
  }
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (ids[i] < 0 || ids[i] >= num) {
      throw std::invalid_argument("embedding: id " + std::to_string(ids[i]) + " at position " +
                                  position_str(ids.shape, i) + " of ids " + ids.shape.str() +
                                  " is out of range for a table of size " + std::to_string(num) + " (weight " +
                                  weight_in.shape().str() + ")");
    }
  }
  const Tensor weight = weight_in.contiguous();
  Tensor out(output_shape(ids, dim), weight.dtype());
  const size_t row_bytes = static_cast<size_t>(dim) * dtype_size(weight.dtype());
  const char* pw = static_cast<const char*>(weight.raw_data());
  char* po = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (row_bytes == 0) break;
    std::memcpy(po + static_cast<size_t>(i) * row_bytes, pw + static_cast<size_t>(ids[i]) * row_bytes, row_bytes);
  }
  return out;
}

EmbeddingRows embedding_backward(const Tensor& g_in, const Indices& ids, int64_t num, int64_t padding_idx) {
  if (!g_in.defined() || g_in.dim() != ids.shape.rank() + 1 ||
      g_in.shape() != output_shape(ids, g_in.shape()[-1])) {
    throw std::invalid_argument("embedding_backward: gradient " +
                                (g_in.defined() ? g_in.shape().str() : std::string("undefined")) +
                                " does not match ids " + ids.shape.str() + " + (dim,)");
  }
  const int64_t dim = g_in.shape()[-1];
  const Tensor g = g_in.contiguous();
  // Each id's slot in `rows`, in order of first appearance.
  std::unordered_map<int64_t, int64_t> slot;
  EmbeddingRows out;
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t id = ids[i];
    if (id == padding_idx) continue;
    if (id < 0 || id >= num) {  // a scatter out of bounds would corrupt memory: refuse it
      throw std::invalid_argument("embedding_backward: id " + std::to_string(id) + " at position " +
                                  position_str(ids.shape, i) + " is out of range for a table of size " +
                                  std::to_string(num));
    }
    if (slot.emplace(id, static_cast<int64_t>(out.ids.size())).second) out.ids.push_back(id);
  }
  out.rows = zeros(Shape{static_cast<int64_t>(out.ids.size()), dim}, g.dtype());
  dispatch(g.dtype(), [&]<typename T>(T) {
    const T* pg = g.data<T>();
    T* po = out.rows.data<T>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      if (ids[i] == padding_idx) continue;
      T* row = po + slot.at(ids[i]) * dim;
      const T* src = pg + i * dim;
      for (int64_t j = 0; j < dim; ++j) row[j] += src[j];
    }
  });
  return out;
}

}  // namespace ag::kernels

namespace ag {

Variable embedding(const Variable& weight, const Indices& ids, int64_t padding_idx) {
  Tensor out = kernels::embedding_forward(weight.value(), ids, padding_idx);  // validates ids and padding_idx
  const int64_t num = weight.shape()[0];
  Indices saved = any_requires_grad({weight}) ? ids : Indices();
  return make_result("embedding", std::move(out), {weight},
                     [saved = std::move(saved), num, padding_idx](const Tensor& g, GradSink& grads) {
                       const kernels::EmbeddingRows rows = kernels::embedding_backward(g, saved, num, padding_idx);
                       grads.add_rows(0, rows.rows, rows.ids);
                     });
}

}  // namespace ag
