// linear: y = x W^T + b as one product with the bias fused into it. The composed twin is
// matmul(x, transpose(W, 0, 1)) + b (five graph nodes); this is one node whose backward is
// two products and a column sum:
//   dx = g W,   dW = g^T x (one product over every row of the folded batch),   db = sum_rows g
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attograd/autograd/nn_ops.h"
#include "attograd/core/kernels.h"

namespace ag {

namespace {

// (rows, n) -> (n,): column sums accumulated in double for f32, as kernels::sum does, row
// after row. Four rows per pass over the accumulators (each column still adds its rows in
// order, so the bits are those of one row per pass): the accumulators are loaded and stored
// once per four rows instead of once per row.
Tensor column_sums(const Tensor& g2) {
  const int64_t rows = g2.shape()[0], n = g2.shape()[1];
  Tensor out(Shape{n}, g2.dtype());
  dispatch(g2.dtype(), [&]<typename T>(T) {
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
    std::vector<Acc> acc(static_cast<size_t>(n), Acc(0));
    Acc* a = acc.data();
    const T* p = g2.data<T>();
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      const T* r0 = p + r * n;
      const T* r1 = r0 + n;
      const T* r2 = r1 + n;
      const T* r3 = r2 + n;
      for (int64_t j = 0; j < n; ++j) {
        a[j] = (((a[j] + static_cast<Acc>(r0[j])) + static_cast<Acc>(r1[j])) + static_cast<Acc>(r2[j])) +
               static_cast<Acc>(r3[j]);
      }
    }
    for (; r < rows; ++r) {
      const T* row = p + r * n;
      for (int64_t j = 0; j < n; ++j) a[j] += static_cast<Acc>(row[j]);
    }
    T* o = out.data<T>();
    for (int64_t j = 0; j < n; ++j) o[j] = static_cast<T>(a[j]);
  });
  return out;
}

}  // namespace

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  if (!x.defined() || !weight.defined()) throw std::invalid_argument("linear: x and weight must be defined");
  const std::string shapes = "x=" + x.shape().str() + " weight=" + weight.shape().str() +
                             (bias.defined() ? " bias=" + bias.shape().str() : std::string());
  if (weight.dim() != 2 || x.dim() < 1 || x.shape()[-1] != weight.shape()[1]) {
    throw std::invalid_argument("linear: expected x (..., in) and weight (out, in), got " + shapes);
  }
  const int64_t in = weight.shape()[1], out = weight.shape()[0];
  if (bias.defined() && (bias.dim() != 1 || bias.shape()[0] != out)) {
    throw std::invalid_argument("linear: bias must be (out,) = (" + std::to_string(out) + ",), got " + shapes);
  }
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != x.dtype())) {
    throw std::invalid_argument(std::string("linear: dtypes differ: x=") + dtype_name(x.dtype()) + " weight=" +
                                dtype_name(weight.dtype()) +
                                (bias.defined() ? std::string(" bias=") + dtype_name(bias.dtype()) : std::string()) +
                                " (" + shapes + ")");
  }
  // Every leading axis folds into the rows of one (rows, in) matrix.
  const int64_t rows = in == 0 ? x.numel() : x.numel() / in;
  const Tensor x2 = x.value().contiguous().view({rows, in});
  const Tensor w = weight.value();
  Shape out_shape(std::vector<int64_t>(x.shape().begin(), x.shape().end() - 1));
  out_shape.push_back(out);
  Tensor y = kernels::matmul(x2, w.t(), bias.defined() ? bias.value() : Tensor()).view(out_shape);
  // dx reads only the weight, dW only x: save just what the wanted gradients read.
  const bool grad_x = any_requires_grad({x});
  const bool grad_w = any_requires_grad({weight});
  Tensor x_saved = grad_w ? x2 : Tensor();  // not const: backward may drop it (see below)
  const Tensor w_saved = grad_x ? w : Tensor();
  std::vector<Variable> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return make_result("linear", std::move(y), inputs,
                     [x_saved, w_saved, rows, out](const Tensor& g, GradSink& grads) mutable {
                       const Tensor g2 = g.contiguous().view({rows, out});
                       // Both products go straight into a gradient that already exists (BLAS
                       // beta = 1): an x feeding several linears (attention's q, k and v
                       // projections) or a weight whose grad is kept across backward calls;
                       // otherwise the product becomes the gradient, with no copy.
                       if (grads.wants(1)) grads.add_matmul(1, g2.t(), x_saved);
                       // dW first: x is then no longer needed, and when the graph is being
                       // freed its memory (the feed-forward's hidden activation for the second
                       // linear, 16 MB per block in the large benchmark) is released before dx
                       // is allocated.
                       if (!grads.graph_retained()) x_saved = Tensor();
                       // dx = g W: a (rows, in) product, which is x's (..., in) gradient reshaped.
                       if (grads.wants(0)) grads.add_matmul(0, g2, w_saved);
                       if (grads.wants(2)) grads.add(2, column_sums(g2));
                     });
}

}  // namespace ag
