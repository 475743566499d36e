// Matrix products through OpenBLAS. Each operand's last two dimensions are handed to BLAS as
// they lie in memory: row-major (stride (ld, 1)) as CblasNoTrans, a transposed view
// (stride (1, ld)) as CblasTrans; anything else is copied to contiguous first.
#include <algorithm>
#include <cstring>
#include <string>

#include "attograd/core/gemm.h"
#include "attograd/core/kernels.h"
#include "attograd/core/parallel.h"

namespace ag::kernels {

namespace {

struct BlasOperand {
  Tensor t;  // possibly a contiguous copy of the caller's tensor
  Transpose trans = Transpose::no;
  int64_t ld = 0;
};

// The last two dimensions as BLAS reads them, copied to contiguous when no flag fits.
BlasOperand as_blas_operand(const Tensor& x) {
  const int64_t r = x.dim();
  BlasOperand o{x};
  const auto fits = [&] {
    return blas_layout(o.t.shape()[r - 2], o.t.shape()[r - 1], o.t.strides()[static_cast<size_t>(r - 2)],
                       o.t.strides()[static_cast<size_t>(r - 1)], o.trans, o.ld);
  };
  if (!fits()) {
    o.t = x.clone();
    fits();
  }
  return o;
}

// The shapes of a product: checks the operands (and the bias) and names them in errors.
struct ProductShapes {
  int64_t m, k, n;
  Shape batch, a_full, b_full, out;
};

ProductShapes product_shapes(const Tensor& a, const Tensor& b, const Tensor& bias) {
  if (!a.defined() || !b.defined()) throw std::invalid_argument("matmul: an input tensor is undefined");
  if (a.dim() < 2 || b.dim() < 2) {
    throw std::invalid_argument("matmul: both operands need at least 2 dimensions: a=" + a.shape().str() +
                                " b=" + b.shape().str());
  }
  if (a.dtype() != b.dtype()) {
    throw std::invalid_argument(std::string("matmul: dtypes differ: a=") + dtype_name(a.dtype()) + " " +
                                a.shape().str() + " b=" + dtype_name(b.dtype()) + " " + b.shape().str());
  }
  const int64_t m = a.shape()[-2];
  const int64_t k = a.shape()[-1];
  const int64_t n = b.shape()[-1];
  if (b.shape()[-2] != k) {
    throw std::invalid_argument("matmul: inner dimensions differ: a=" + a.shape().str() + " b=" + b.shape().str());
  }
  const Shape a_batch(std::vector<int64_t>(a.shape().begin(), a.shape().end() - 2));
  const Shape b_batch(std::vector<int64_t>(b.shape().begin(), b.shape().end() - 2));
  Shape batch;
  try {
    batch = broadcast_shapes(a_batch, b_batch, "matmul");
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("matmul: batch dimensions do not broadcast: a=" + a.shape().str() +
                                " b=" + b.shape().str());
  }
  Shape a_full = batch, b_full = batch, out_shape = batch;
  a_full.push_back(m); a_full.push_back(k);
  b_full.push_back(k); b_full.push_back(n);
  out_shape.push_back(m); out_shape.push_back(n);

  if (bias.defined() && (bias.dim() != 1 || bias.shape()[0] != n || bias.dtype() != a.dtype())) {
    throw std::invalid_argument(std::string("matmul: bias ") + bias.shape().str() + " " + dtype_name(bias.dtype()) +
                                " must be (N,) = (" + std::to_string(n) + ",) " + dtype_name(a.dtype()) +
                                " for a=" + a.shape().str() + " b=" + b.shape().str());
  }
  return {m, k, n, batch, a_full, b_full, out_shape};
}

// out = a b + beta out, out contiguous of the product's shape (beta 0: out's contents ignored).
void run_product(const Tensor& a, const Tensor& b, const ProductShapes& shapes, Tensor& out, double beta) {
  const int64_t m = shapes.m, k = shapes.k, n = shapes.n;
  const Shape& batch = shapes.batch;
  const BlasOperand A = as_blas_operand(a.expand(shapes.a_full));
  const BlasOperand B = as_blas_operand(b.expand(shapes.b_full));
  if (out.numel() == 0) return;
  if (k == 0) {
    if (beta == 0.0) out.fill_(0.0);
    return;
  }

  const int64_t nb = batch.numel();
  const int64_t rank = batch.rank();
  // Big products are split over the pool: by batch item when there are enough of them, else by
  // rows of each product, one single-threaded BLAS call per piece. Pieces start at multiples of
  // gemm_row_alignment() rows (core/gemm.h): BLAS kernels give a matrix's last rows (past a
  // multiple of their unroll) a different loop, and an aligned split keeps every row on the
  // same path, so the bits do not depend on the thread count (tests/core/test_parallel.cpp
  // holds this; splitting columns does not keep it, and a column cut fixed by the shape was
  // slower at 8 x 256 tokens, bench/RESULTS.md, so it is not done). The finer the step, the more
  // even the halves: 256 rows split 132 / 124 at 12, 144 / 112 at 48. The rows past the last
  // multiple go with the piece before them: a piece of one row alone would be a matrix-vector
  // product to BLAS, another loop again.
  const int64_t kSplitAlign = gemm_row_alignment();
  const double work = 2.0 * static_cast<double>(nb) * static_cast<double>(m) * static_cast<double>(n) *
                      static_cast<double>(k);
  const int64_t units = std::max<int64_t>(1, m / kSplitAlign);
  const int64_t threads = parallel_chunks(std::max(nb, units), work);
  const bool split_batch = nb >= threads;
  dispatch(a.dtype(), [&]<typename T>(T) {
    const T* pa = A.t.data<T>();
    const T* pb = B.t.data<T>();
    T* po = out.data<T>();
    // Rows r0..r1 of C for batch item bi.
    const auto product = [&](int64_t bi, int64_t r0, int64_t r1) {
      int64_t oa = 0, ob = 0, rest = bi;
      for (int64_t d = rank - 1; d >= 0; --d) {
        const int64_t i = rest % batch[d];
        rest /= batch[d];
        oa += i * A.t.strides()[static_cast<size_t>(d)];
        ob += i * B.t.strides()[static_cast<size_t>(d)];
      }
      // Row r of op(A) starts at r * ld (NoTrans) or at r (Trans).
      oa += A.trans == Transpose::no ? r0 * A.ld : r0;
      T* c = po + bi * m * n + r0 * n;
      gemm(A.trans, B.trans, r1 - r0, n, k, T(1), pa + oa, A.ld, pb + ob, B.ld, static_cast<T>(beta), c, n);
    };
    if (threads <= 1 || split_batch) {
      parallel_for(nb, threads, [&](int64_t b0, int64_t b1) {
        for (int64_t bi = b0; bi < b1; ++bi) product(bi, 0, m);
      });
      return;
    }
    for (int64_t bi = 0; bi < nb; ++bi) {
      parallel_for(units, std::min(threads, units), [&](int64_t u0, int64_t u1) {
        product(bi, u0 * kSplitAlign, u1 == units ? m : u1 * kSplitAlign);
      });
    }
  });
}

// Every row of the contiguous (..., N) `out` becomes the (N,) `bias`: one memcpy per row
// instead of Tensor::copy_'s general broadcasting walk (a fifth of the tiny step's copying).
void fill_rows(Tensor& out, const Tensor& bias) {
  const Tensor b = bias.contiguous();
  const int64_t n = b.numel();
  const std::size_t row_bytes = static_cast<std::size_t>(n) * dtype_size(b.dtype());
  const char* src = static_cast<const char*>(b.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t r = 0; r < out.numel() / n; ++r) std::memcpy(dst + static_cast<std::size_t>(r) * row_bytes, src, row_bytes);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, const Tensor& bias) {
  const ProductShapes shapes = product_shapes(a, b, bias);
  Tensor out(shapes.out, a.dtype());
  // With a bias every row of C starts as the bias and BLAS adds the product (beta = 1): the
  // same pass over C that beta = 0 spends on zeroing it.
  if (bias.defined() && out.numel() > 0) fill_rows(out, bias);
  run_product(a, b, shapes, out, bias.defined() ? 1.0 : 0.0);
  return out;
}

namespace {

// out = a b (beta 0) or out += a b (beta 1), into an existing contiguous out of the product's
// shape and dtype.
void product_into(Tensor& out, const Tensor& a, const Tensor& b, double beta, const char* kernel) {
  const ProductShapes shapes = product_shapes(a, b, Tensor());
  if (!out.defined() || out.shape() != shapes.out || out.dtype() != a.dtype() || !out.is_contiguous()) {
    throw std::invalid_argument(
        std::string(kernel) + ": out must be a contiguous " + shapes.out.str() + " " + dtype_name(a.dtype()) +
        " for a=" + a.shape().str() + " b=" + b.shape().str() + ", got " +
        (out.defined() ? out.shape().str() + " " + dtype_name(out.dtype()) + (out.is_contiguous() ? "" : " (non-contiguous)")
                       : std::string("undefined")));
  }
  // BLAS reads its operands while it writes out: one that shares out's memory at all (even in
  // out's own layout) is read from a copy.
  const auto apart = [&](const Tensor& x) { return memory_overlap(out, x) == MemoryOverlap::none ? x : x.clone(); };
  run_product(apart(a), apart(b), shapes, out, beta);
}

}  // namespace

void matmul_add_(Tensor& out, const Tensor& a, const Tensor& b) { product_into(out, a, b, 1.0, "matmul_add_"); }

void matmul_into_(Tensor& out, const Tensor& a, const Tensor& b) { product_into(out, a, b, 0.0, "matmul_into_"); }

Tensor concat(const std::vector<Tensor>& parts, int64_t axis_in) {
  if (parts.empty()) throw std::invalid_argument("concat: needs at least one tensor");
  const Tensor& first = parts.front();
  if (!first.defined()) throw std::invalid_argument("concat: input 0 is undefined");
  const int64_t axis = normalize_axis(axis_in, first.shape(), "concat");
  Shape shape = first.shape();
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    bool ok = p.defined() && p.dim() == first.dim() && p.dtype() == first.dtype();
    for (int64_t d = 0; ok && d < first.dim(); ++d) ok = d == axis || p.shape()[d] == first.shape()[d];
    if (!ok) {
      throw std::invalid_argument("concat: input " + std::to_string(i) + " " +
                                  (p.defined() ? p.shape().str() + " " + dtype_name(p.dtype()) : "undefined") +
                                  " does not match input 0 " + first.shape().str() + " " +
                                  dtype_name(first.dtype()) + " outside axis " + std::to_string(axis));
    }
    total += p.shape()[axis];
  }
  shape[axis] = total;
  Tensor out(shape, first.dtype());
  int64_t at = 0;
  for (const Tensor& p : parts) {
    out.narrow(axis, at, p.shape()[axis]).copy_(p);
    at += p.shape()[axis];
  }
  return out;
}

}  // namespace ag::kernels
