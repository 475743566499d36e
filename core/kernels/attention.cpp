// Scaled dot-product attention, forward and backward, one (batch, head) slice at a time:
//
//   S = scale * Q K^T (+ bias), masked where keep == 0      (Tq, Tk)
//   P = softmax over keys (a row with no kept key is all zero)
//   O = dropout(P) V                                         (Tq, Dv)
// backward, with Pd = dropout(P) and dPd = dO V^T:
//   dV = Pd^T dO,   dP = dropout(dPd),   dS = P * (dP - rowsum(dP * P))
//   dQ = scale * dS K,   dK = scale * dS^T Q
//
// Large slices go to BLAS straight from the operands' memory: a matrix whose rows or columns
// are unit-strided is passed with the matching transpose flag and leading dimension, so q/k/v
// produced by permuting a (B, T, H, D) tensor are read in place. Small slices (a tiny model's
// 16x16x16 heads) run direct loops instead (small_gemm): a BLAS call packs both operands and
// zeroes C every time, which costs more than the product itself at that size. The direct loops
// need unit-strided rows of the right operand, so K^T (forward) or V^T (backward) of a slice is
// copied to scratch when it is not already laid out that way. Only the scores of one slice and
// those copies live in scratch memory besides the saved weights; the dropout mask is
// regenerated from its key rather than stored.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attograd/core/kernels.h"
#include "attograd/core/parallel.h"
#include "attograd/core/vec_math.h"

namespace ag::kernels {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// How BLAS reads the (rows, cols) matrices of one operand's (b, h) slices.
struct Operand {
  Tensor t;  // the caller's tensor, or a contiguous copy when its matrices are not BLAS-readable
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int64_t ld = 1;
  int64_t stride_b = 0, stride_h = 0;

  template <typename T>
  const T* slice(int64_t b, int64_t h) const {
    return t.data<T>() + b * stride_b + h * stride_h;
  }
};

// True when a (rows, cols) matrix with strides (s_row, s_col) can be handed to BLAS as is.
bool blas_layout(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col, CBLAS_TRANSPOSE& trans, int64_t& ld) {
  if ((cols == 1 || s_col == 1) && (rows == 1 || s_row >= std::max<int64_t>(cols, 1))) {
    trans = CblasNoTrans;
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : s_row;
    return true;
  }
  if ((rows == 1 || s_row == 1) && (cols == 1 || s_col >= std::max<int64_t>(rows, 1))) {
    trans = CblasTrans;
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : s_col;
    return true;
  }
  return false;
}

Operand make_operand(const Tensor& x) {
  Operand o;
  o.t = x;
  const auto fits = [&o] {
    const Tensor& t = o.t;
    return blas_layout(t.shape()[2], t.shape()[3], t.strides()[2], t.strides()[3], o.trans, o.ld);
  };
  if (!fits()) {
    o.t = x.clone();
    fits();
  }
  o.stride_b = o.t.strides()[0];
  o.stride_h = o.t.strides()[1];
  return o;
}

CBLAS_TRANSPOSE flipped(CBLAS_TRANSPOSE t) { return t == CblasNoTrans ? CblasTrans : CblasNoTrans; }

// C (m, n, row stride ldc) = alpha * op(A) op(B) + beta * C, with op(A): (m, k), op(B): (k, n).
template <typename T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: BLAS's argument checks would reject the zero-sized operands
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    }
    return;
  }
  const auto I = [](int64_t v) { return static_cast<int>(v); };
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, I(m), I(n), I(k), alpha, a, I(lda), b, I(ldb), beta, c, I(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, I(m), I(n), I(k), alpha, a, I(lda), b, I(ldb), beta, c, I(ldc));
  }
}

// An optional (B, H, Tq, Tk)-broadcast tensor read through its strides (0 where broadcast).
template <typename T>
struct ScoreOperand {
  const T* data = nullptr;
  std::vector<int64_t> strides;

  ScoreOperand(const Tensor& t, const Shape& scores) {
    if (!t.defined()) return;
    data = t.data<T>();
    strides = t.expand(scores).strides();
  }
  const T* row(int64_t b, int64_t h, int64_t i) const {
    return data + b * strides[0] + h * strides[1] + i * strides[2];
  }
  int64_t step() const { return strides[3]; }
};

// dst[e] = src[e] * scale where the mask keeps element base + e, else 0 (dst may be src).
template <typename T>
void drop(const T* src, T* dst, int64_t n, uint64_t base, const DropoutMask& dropout) {
  const T scale = static_cast<T>(dropout.scale());
  for (int64_t e = 0; e < n; ++e) dst[e] = dropout.keeps(base + static_cast<uint64_t>(e)) ? src[e] * scale : T(0);
}

// One row of scores -> attention weights in place: add the bias, set masked keys to -inf,
// softmax over the row; a row with no kept key becomes all zero. For f32 the max, exp and sum
// are separate vectorised passes (core/vec_math.h; the sum in a fixed 8-lane order).
template <typename T>
void softmax_row(T* row, int64_t n, const ScoreOperand<T>& add, const ScoreOperand<T>& mask, int64_t b, int64_t h,
                 int64_t i) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  if (add.data) {
    const T* a = add.row(b, h, i);
    for (int64_t j = 0; j < n; ++j) row[j] += a[j * add.step()];
  }
  if (mask.data) {
    const T* m = mask.row(b, h, i);
    for (int64_t j = 0; j < n; ++j) {
      if (m[j * mask.step()] == T(0)) row[j] = neg_inf;
    }
  }
  const T mx = row_max(row, n);
  if (mx == neg_inf) {  // every key masked: zero weights, hence a zero output row
    std::fill(row, row + n, T(0));
    return;
  }
  exp_row(row, row, n, mx);
  const T inv = 1 / row_sum(row, n);
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

// ---- direct products for small slices ----

// Multiply-adds of one slice product up to which the direct loops beat a BLAS call. Measured
// (CPU time of attention forward + backward, f32, one thread, AVX2 machine): direct is 1.3-3x
// faster for 16x16x16 and 32x32x32 slices and up to 10% faster for 64x64x32 (medium); about
// even for 64x64x64 and 128x128x32; BLAS is 20-30% faster for 128x128x64 (large), where its
// packed FMA kernels pay for their per-call cost. Above 2^17 the direct path has no clear gain.
constexpr int64_t kDirectMaxMacs = int64_t{1} << 17;

bool use_direct(AttentionPath path, int64_t macs) {
  switch (path) {
    case AttentionPath::automatic: return macs <= kDirectMaxMacs;
    case AttentionPath::blas: return false;
    case AttentionPath::direct: return true;
  }
  return false;
}

// Element strides of an operand's (rows, cols) slice matrix.
int64_t row_stride(const Operand& o) { return o.trans == CblasNoTrans ? o.ld : 1; }
int64_t col_stride(const Operand& o) { return o.trans == CblasNoTrans ? 1 : o.ld; }

// The 4x4 block at src (row stride ld) transposed into dst (row stride ldd), through SSE
// shuffles: pure data movement, 16 loads and stores instead of 16 strided scalar copies.
inline void transpose4x4(const float* src, int64_t ld, float* dst, int64_t ldd) {
  const F32x4 r0 = *reinterpret_cast<const F32x4*>(src), r1 = *reinterpret_cast<const F32x4*>(src + ld);
  const F32x4 r2 = *reinterpret_cast<const F32x4*>(src + 2 * ld), r3 = *reinterpret_cast<const F32x4*>(src + 3 * ld);
  const F32x4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5), t1 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
  const F32x4 t2 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7), t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
  *reinterpret_cast<F32x4*>(dst) = __builtin_shufflevector(t0, t1, 0, 1, 4, 5);
  *reinterpret_cast<F32x4*>(dst + ldd) = __builtin_shufflevector(t0, t1, 2, 3, 6, 7);
  *reinterpret_cast<F32x4*>(dst + 2 * ldd) = __builtin_shufflevector(t2, t3, 0, 1, 4, 5);
  *reinterpret_cast<F32x4*>(dst + 3 * ldd) = __builtin_shufflevector(t2, t3, 2, 3, 6, 7);
}

// dst (n, m), row stride m, = the transpose of src (m, n), row stride ld.
template <typename T>
void transpose(const T* src, int64_t ld, int64_t m, int64_t n, T* dst) {
  int64_t r0 = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; r0 + 4 <= m; r0 += 4) {
      int64_t c = 0;
      for (; c + 4 <= n; c += 4) transpose4x4(src + r0 * ld + c, ld, dst + c * m + r0, m);
      for (; c < n; ++c) {
        for (int64_t r = r0; r < r0 + 4; ++r) dst[c * m + r] = src[r * ld + c];
      }
    }
  }
  for (; r0 < m; ++r0) {
    for (int64_t c = 0; c < n; ++c) dst[c * m + r0] = src[r0 * ld + c];
  }
}

// The (rows, cols) slice of `o` as a matrix with unit-strided rows, or with `transposed` its
// (cols, rows) transpose: in place when it already lies that way in memory, else a copy in
// `scratch` (rows * cols). `ld` receives the row stride.
template <typename T>
const T* unit_rows(const Operand& o, int64_t b, int64_t h, int64_t rows, int64_t cols, bool transposed, T* scratch,
                   int64_t& ld) {
  const T* p = o.slice<T>(b, h);
  if (o.trans == (transposed ? CblasTrans : CblasNoTrans)) {
    ld = o.ld;
    return p;
  }
  // The stored matrix is the other orientation: (cols, rows) for plain rows, (rows, cols) else.
  const int64_t stored_rows = transposed ? rows : cols, stored_cols = transposed ? cols : rows;
  transpose(p, o.ld, stored_rows, stored_cols, scratch);
  ld = stored_rows;
  return scratch;
}

template <typename T>
const T* rows_of(const Operand& o, int64_t b, int64_t h, int64_t rows, int64_t cols, T* scratch, int64_t& ld) {
  return unit_rows(o, b, h, rows, cols, false, scratch, ld);
}

template <typename T>
const T* columns_of(const Operand& o, int64_t b, int64_t h, int64_t rows, int64_t cols, T* scratch, int64_t& ld) {
  return unit_rows(o, b, h, rows, cols, true, scratch, ld);
}

// Scratch sized for one slice, allocated once per parallel chunk; empty when unused.
template <typename T>
std::vector<T> scratch_if(bool needed, int64_t elems) {
  return std::vector<T>(needed ? static_cast<size_t>(elems) : 0);
}

}  // namespace

void check_attention_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& keep,
                               const Tensor& bias) {
  if (!q.defined() || !k.defined() || !v.defined()) {
    throw std::invalid_argument(std::string(kOp) + ": q, k and v must all be defined");
  }
  const std::string shapes = "q=" + q.shape().str() + " k=" + k.shape().str() + " v=" + v.shape().str();
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) {
    throw std::invalid_argument(std::string(kOp) + ": q, k and v must be 4-D (B, H, T, D): " + shapes);
  }
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype()) {
    throw std::invalid_argument(std::string(kOp) + ": dtypes differ: q=" + dtype_name(q.dtype()) + " k=" +
                                dtype_name(k.dtype()) + " v=" + dtype_name(v.dtype()) + " (" + shapes + ")");
  }
  if (q.shape()[0] != k.shape()[0] || q.shape()[0] != v.shape()[0] || q.shape()[1] != k.shape()[1] ||
      q.shape()[1] != v.shape()[1]) {
    throw std::invalid_argument(std::string(kOp) + ": batch and head dimensions (B, H) differ: " + shapes);
  }
  if (q.shape()[3] != k.shape()[3]) {
    throw std::invalid_argument(std::string(kOp) + ": query and key depths Dk differ: " + shapes);
  }
  if (k.shape()[2] != v.shape()[2]) {
    throw std::invalid_argument(std::string(kOp) + ": key and value lengths Tk differ: " + shapes);
  }
  const Shape scores{q.shape()[0], q.shape()[1], q.shape()[2], k.shape()[2]};
  if (keep.defined() && !broadcastable_to(keep.shape(), scores)) {
    throw std::invalid_argument(std::string(kOp) + ": keep mask " + keep.shape().str() +
                                " does not broadcast to the scores (B, H, Tq, Tk) = " + scores.str() + " (" + shapes +
                                ")");
  }
  if (bias.defined()) {
    if (!broadcastable_to(bias.shape(), scores)) {
      throw std::invalid_argument(std::string(kOp) + ": bias " + bias.shape().str() +
                                  " does not broadcast to the scores (B, H, Tq, Tk) = " + scores.str() + " (" +
                                  shapes + ")");
    }
    if (bias.dtype() != q.dtype()) {
      throw std::invalid_argument(std::string(kOp) + ": bias " + bias.shape().str() + " has dtype " +
                                  dtype_name(bias.dtype()) + " but q has " + dtype_name(q.dtype()));
    }
  }
}

// A (B, H, T, D) result laid out in memory as (B, T, H, D), returned as the permuted view.
// Multi-head attention moves the heads back beside each other ((B, T, H * D) for the output
// projection, and q, k and v come from (B, T, H * D) projections), so with this layout the
// head merge of the output and of the q/k/v gradients is a view instead of a copy. Slice
// (b, h) starts at b * T * H * D + h * D with rows H * D apart.
Tensor heads_interleaved(int64_t B, int64_t H, int64_t T, int64_t D, DType dtype) {
  return Tensor(Shape{B, T, H, D}, dtype).permute({0, 2, 1, 3});
}

template <typename T>
T* interleaved_slice(Tensor& t, int64_t b, int64_t h) {
  const int64_t H = t.shape()[1], len = t.shape()[2], D = t.shape()[3];
  return t.data<T>() + b * len * H * D + h * D;
}

AttentionForward attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& keep_in,
                                   const Tensor& bias, double scale, const DropoutMask& dropout, AttentionPath path) {
  check_attention_arguments(q_in, k_in, v_in, keep_in, bias);
  check_dropout_probability(dropout.p, kOp);
  const int64_t B = q_in.shape()[0], H = q_in.shape()[1], Tq = q_in.shape()[2], Dk = q_in.shape()[3];
  const int64_t Tk = k_in.shape()[2], Dv = v_in.shape()[3];
  const Shape scores{B, H, Tq, Tk};
  const Operand Q = make_operand(q_in), K = make_operand(k_in), V = make_operand(v_in);
  const Tensor keep = keep_in.defined() ? keep_in.to(q_in.dtype()) : Tensor();
  AttentionForward out{heads_interleaved(B, H, Tq, Dv, q_in.dtype()), Tensor(scores, q_in.dtype())};
  dispatch(q_in.dtype(), [&]<typename T>(T) {
    const ScoreOperand<T> mask(keep, scores), add(bias, scores);
    const T kScale = static_cast<T>(scale);
    const bool direct_scores = use_direct(path, Tq * Tk * Dk), direct_output = use_direct(path, Tq * Tk * Dv);
    // (b, h) slices are independent: split them over the pool, each piece with its own scratch.
    const double work = 4.0 * static_cast<double>(B * H * Tq * Tk) * static_cast<double>(Dk + Dv);
    parallel_for(B * H, parallel_chunks(B * H, work), [&](int64_t first, int64_t last) {
      std::vector<T> dropped = scratch_if<T>(dropout.active(), Tq * Tk);
      std::vector<T> k_columns = scratch_if<T>(direct_scores && K.trans == CblasNoTrans, Dk * Tk);
      std::vector<T> v_rows = scratch_if<T>(direct_output && V.trans == CblasTrans, Tk * Dv);
      for (int64_t slice = first; slice < last; ++slice) {
        const int64_t b = slice / H, h = slice % H;
        T* P = out.weights.data<T>() + slice * Tq * Tk;
        if (direct_scores) {
          int64_t ld = 0;
          const T* kt = columns_of<T>(K, b, h, Tk, Dk, k_columns.data(), ld);
          small_gemm(Tq, Tk, Dk, kScale, Q.slice<T>(b, h), row_stride(Q), col_stride(Q), kt, ld, P, Tk);
        } else {
          gemm<T>(Q.trans, flipped(K.trans), Tq, Tk, Dk, kScale, Q.slice<T>(b, h), Q.ld, K.slice<T>(b, h), K.ld,
                  T(0), P, Tk);
        }
        for (int64_t i = 0; i < Tq; ++i) softmax_row(P + i * Tk, Tk, add, mask, b, h, i);
        const T* weights = P;
        if (dropout.active()) {
          drop(P, dropped.data(), Tq * Tk, static_cast<uint64_t>(slice * Tq * Tk), dropout);
          weights = dropped.data();
        }
        T* O = interleaved_slice<T>(out.output, b, h);
        if (direct_output) {
          int64_t ld = 0;
          const T* vr = rows_of<T>(V, b, h, Tk, Dv, v_rows.data(), ld);
          small_gemm(Tq, Dv, Tk, T(1), weights, Tk, 1, vr, ld, O, H * Dv);
        } else {
          gemm<T>(CblasNoTrans, V.trans, Tq, Dv, Tk, T(1), weights, Tk, V.slice<T>(b, h), V.ld, T(0), O, H * Dv);
        }
      }
    });
  });
  return out;
}

AttentionGrads attention_backward(const Tensor& g_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                  const Tensor& weights_in, double scale, const DropoutMask& dropout, bool want_q,
                                  bool want_k, bool want_v, bool want_scores, AttentionPath path) {
  // Shapes come from whichever operands were saved: q is needed only for dk, k only for dq.
  const bool want_scores_path = want_q || want_k || want_scores;
  // t is (B, H, length, D) with the weights' B and H.
  const auto fits = [&](const Tensor& t, int64_t length) {
    return t.defined() && t.dim() == 4 && t.shape()[0] == weights_in.shape()[0] &&
           t.shape()[1] == weights_in.shape()[1] && t.shape()[2] == length;
  };
  const bool weights_ok = weights_in.defined() && weights_in.dim() == 4;
  if (!weights_ok || !fits(g_in, weights_in.shape()[2]) || (want_q && !fits(k_in, weights_in.shape()[3])) ||
      (want_k && !fits(q_in, weights_in.shape()[2])) ||
      (want_scores_path && (!fits(v_in, weights_in.shape()[3]) || v_in.shape()[3] != g_in.shape()[3])) ||
      (want_q && want_k && q_in.shape()[3] != k_in.shape()[3])) {
    throw std::invalid_argument(std::string(kOp) + "_backward: gradient " +
                                (g_in.defined() ? g_in.shape().str() : std::string("undefined")) +
                                " or saved operands do not match the weights " +
                                (weights_in.defined() ? weights_in.shape().str() : std::string("undefined")));
  }
  const int64_t B = weights_in.shape()[0], H = weights_in.shape()[1];
  const int64_t Tq = weights_in.shape()[2], Tk = weights_in.shape()[3];
  const int64_t Dv = g_in.shape()[3];
  const Tensor weights = weights_in.contiguous();
  const Operand G = make_operand(g_in);
  const Operand Q = want_k ? make_operand(q_in) : Operand{};
  const Operand K = want_q ? make_operand(k_in) : Operand{};
  const Operand V = want_scores_path ? make_operand(v_in) : Operand{};
  const int64_t Dk = want_q ? k_in.shape()[3] : want_k ? q_in.shape()[3] : 0;
  const DType dtype = weights.dtype();
  AttentionGrads out;
  if (want_q) out.dq = heads_interleaved(B, H, Tq, Dk, dtype);
  if (want_k) out.dk = heads_interleaved(B, H, Tk, Dk, dtype);
  if (want_v) out.dv = heads_interleaved(B, H, Tk, Dv, dtype);
  if (want_scores) out.dscores = Tensor(weights.shape(), dtype);
  dispatch(dtype, [&]<typename T>(T) {
    const T kScale = static_cast<T>(scale);
    const int64_t slice_elems = Tq * Tk;
    const bool direct_v = use_direct(path, Tq * Tk * Dv), direct_scores = use_direct(path, Tq * Tk * Dv);
    const bool direct_q = use_direct(path, Tq * Tk * Dk), direct_k = direct_q;
    const double work = 2.0 * static_cast<double>(B * H * Tq * Tk) * static_cast<double>(Dv + 2 * Dk + Dv);
    parallel_for(B * H, parallel_chunks(B * H, work), [&](int64_t first, int64_t last) {
      std::vector<T> dropped = scratch_if<T>(dropout.active() && want_v, slice_elems);
      std::vector<T> scratch = scratch_if<T>(want_scores_path && !want_scores, slice_elems);
      std::vector<T> g_rows = scratch_if<T>(want_v && direct_v && G.trans == CblasTrans, Tq * Dv);
      std::vector<T> v_columns =
          scratch_if<T>(want_scores_path && direct_scores && V.trans == CblasNoTrans, Dv * Tk);
      std::vector<T> k_rows = scratch_if<T>(want_q && direct_q && K.trans == CblasTrans, Tk * Dk);
      std::vector<T> q_rows = scratch_if<T>(want_k && direct_k && Q.trans == CblasTrans, Tq * Dk);
      for (int64_t slice = first; slice < last; ++slice) {
        const int64_t b = slice / H, h = slice % H;
        const uint64_t base = static_cast<uint64_t>(slice * Tq * Tk);
        const T* P = weights.data<T>() + slice * Tq * Tk;
        const T* dO = G.slice<T>(b, h);
        if (want_v) {
          const T* Pd = P;
          if (dropout.active()) {
            drop(P, dropped.data(), Tq * Tk, base, dropout);
            Pd = dropped.data();
          }
          T* dV = interleaved_slice<T>(out.dv, b, h);
          if (direct_v) {  // dV = Pd^T dO: A = Pd read transposed
            int64_t ld = 0;
            const T* g = rows_of<T>(G, b, h, Tq, Dv, g_rows.data(), ld);
            small_gemm(Tk, Dv, Tq, T(1), Pd, 1, Tk, g, ld, dV, H * Dv);
          } else {
            gemm<T>(CblasTrans, G.trans, Tk, Dv, Tq, T(1), Pd, Tk, dO, G.ld, T(0), dV, H * Dv);
          }
        }
        if (!want_scores_path) continue;
        T* dS = want_scores ? out.dscores.data<T>() + slice * Tq * Tk : scratch.data();
        if (direct_scores) {  // dPd = dO V^T
          int64_t ld = 0;
          const T* vt = columns_of<T>(V, b, h, Tk, Dv, v_columns.data(), ld);
          small_gemm(Tq, Tk, Dv, T(1), dO, row_stride(G), col_stride(G), vt, ld, dS, Tk);
        } else {
          gemm<T>(G.trans, flipped(V.trans), Tq, Tk, Dv, T(1), dO, G.ld, V.slice<T>(b, h), V.ld, T(0), dS, Tk);
        }
        for (int64_t i = 0; i < Tq; ++i) {
          T* d = dS + i * Tk;
          const T* p = P + i * Tk;
          if (dropout.active()) drop(d, d, Tk, base + static_cast<uint64_t>(i * Tk), dropout);
          // Masked keys and fully masked rows have p = 0, so their score gradient is exactly 0.
          const T dot = row_dot(d, p, Tk);
          for (int64_t j = 0; j < Tk; ++j) d[j] = p[j] * (d[j] - dot);
        }
        if (want_q) {
          T* dQ = interleaved_slice<T>(out.dq, b, h);
          if (direct_q) {  // dQ = scale dS K
            int64_t ld = 0;
            const T* kr = rows_of<T>(K, b, h, Tk, Dk, k_rows.data(), ld);
            small_gemm(Tq, Dk, Tk, kScale, dS, Tk, 1, kr, ld, dQ, H * Dk);
          } else {
            gemm<T>(CblasNoTrans, K.trans, Tq, Dk, Tk, kScale, dS, Tk, K.slice<T>(b, h), K.ld, T(0), dQ, H * Dk);
          }
        }
        if (want_k) {
          T* dK = interleaved_slice<T>(out.dk, b, h);
          if (direct_k) {  // dK = scale dS^T Q: A = dS read transposed
            int64_t ld = 0;
            const T* qr = rows_of<T>(Q, b, h, Tq, Dk, q_rows.data(), ld);
            small_gemm(Tk, Dk, Tq, kScale, dS, 1, Tk, qr, ld, dK, H * Dk);
          } else {
            gemm<T>(CblasTrans, Q.trans, Tk, Dk, Tq, kScale, dS, Tk, Q.slice<T>(b, h), Q.ld, T(0), dK, H * Dk);
          }
        }
      }
    });
  });
  return out;
}

}  // namespace ag::kernels
