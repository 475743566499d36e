// scaled_dot_product_attention: scores, mask, softmax, dropout and the value product fused,
// with a hand-written backward (kernels::attention_backward). Saved: q and k, v when a gradient
// goes through the scores, the keep mask and bias as given, the dropout key, and two softmax
// statistics per query row (B, H, Tq) -- not the weights (B, H, Tq, Tk). The backward
// recomputes each slice's weights from these into per-thread scratch, with the forward's own
// code, so they are the forward's bits: one more Q K^T product per slice buys back the largest
// activation of a transformer layer (12 MiB per layer of the large GPT benchmark, 72 MiB in all).
//
// The kernels work one (batch, head) slice at a time:
//   S = scale * Q K^T (+ bias), masked where keep == 0      (Tq, Tk)
//   P = softmax over keys (a row with no kept key is all zero)
//   O = dropout(P) V                                         (Tq, Dv)
// backward, with Pd = dropout(P) and dPd = dO V^T:
//   dV = Pd^T dO,   dP = dropout(dPd),   dS = P * (dP - rowsum(dP * P))
//   dQ = scale * dS K,   dK = scale * dS^T Q
//
// A slice goes 32 query rows at a time, each block stopping at the last key one of its rows
// keeps: keys a mask hides past it (nearly half of a causal mask) are never scored or multiplied.
//
// Large products go to BLAS straight from the operands' memory: a matrix whose rows or columns
// are unit-strided is passed with the matching transpose flag and leading dimension, so q/k/v
// produced by permuting a (B, T, H, D) tensor are read in place. Small products (a tiny model's
// 16x16x16 heads, the blocks of the baby GPT's 32-deep ones) run direct loops instead
// (small_gemm): a BLAS call packs both operands and zeroes C every time, which costs more than
// the product itself at that size. The direct loops need unit-strided rows of the right
// operand, so K^T (forward) or V^T (backward) of a slice is copied to scratch, once per slice,
// when it is not already laid out that way. Only a slice's weights (and in the backward its
// score gradients) and those copies live in scratch memory; the dropout mask is regenerated
// from its key rather than stored.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/attention_slices.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/gemm.h"
#include "attograd/core/kernels.h"
#include "attograd/core/parallel.h"
#include "attograd/core/vec_math.h"

namespace ag::kernels {

using namespace attention_slices;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

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

// C (Tq, Tk), row stride Tk, = alpha A X^T a query block at a time, up to each block's reach,
// for the products of a query row with every key: the scores (A = Q, X = K) and dPd (A = dO,
// X = V), both (T, D) operands. Each row then goes to each_row(i, row, n) with its first n
// entries computed, and entries n.. are zeroed. x_columns: scratch for X^T (D * Tk) when the
// direct loops need it.
template <typename T, typename EachRow>
void with_every_key(const Blocks& blocks, AttentionPath path, T alpha, const Operand& A, const Operand& X, int64_t b,
                    int64_t h, int64_t D, T* x_columns, T* C, EachRow&& each_row) {
  const int64_t Tk = blocks.Tk;
  const T* xt = nullptr;
  int64_t ld = 0;
  for (int64_t r = 0; r < blocks.query_blocks(); ++r) {
    const auto [r0, rows, n] = blocks.query(r);
    if (use_direct(path, rows * n * D)) {
      if (!xt) xt = columns_of<T>(X, b, h, Tk, D, x_columns, ld);
      small_gemm(rows, n, D, alpha, row_at<T>(A, b, h, r0), row_stride(A), col_stride(A), xt, ld, C + r0 * Tk, Tk);
    } else {
      gemm(A.trans, flipped(X.trans), rows, n, D, alpha, row_at<T>(A, b, h, r0), A.ld, X.slice<T>(b, h), X.ld, T(0),
           C + r0 * Tk, Tk);
    }
    for (int64_t i = r0; i < r0 + rows; ++i) {
      each_row(i, C + i * Tk, n);
      std::fill(C + i * Tk + n, C + (i + 1) * Tk, T(0));
    }
  }
}

// The weights of one (b, h) slice come from its masked scores S = scale Q K^T + bias, with
// masked keys at -inf (Tq, Tk); the forward computes them and the backward computes them again
// with this same code and the same blocks, so both get the same bits.
template <typename T>
struct SliceScores {
  const Operand& Q;
  const Operand& K;
  const ScoreOperand<T>& add;
  const ScoreOperand<T>& mask;
  int64_t Tq, Tk, Dk;
  T scale;
  AttentionPath path;

  bool needs_k_columns() const { return path != AttentionPath::blas && K.trans == Transpose::no; }

  // S: (Tq, Tk), row stride Tk, block by block (blocks: from the mask); each row goes to
  // finish_row(i, row, n) once its first n entries are masked (the softmax, in place).
  // k_columns: scratch for K^T (Dk * Tk) when needs_k_columns().
  template <typename FinishRow>
  void compute(int64_t b, int64_t h, const Blocks& blocks, T* k_columns, T* S, FinishRow&& finish_row) const {
    with_every_key(blocks, path, scale, Q, K, b, h, Dk, k_columns, S, [&](int64_t i, T* row, int64_t n) {
      if (add.data) {
        const T* a = add.row(b, h, i);
        for (int64_t j = 0; j < n; ++j) row[j] += a[j * add.step()];
      }
      if (mask.data) {
        const T* m = mask.row(b, h, i);
        for (int64_t j = 0; j < n; ++j) {
          if (m[j * mask.step()] == T(0)) row[j] = -std::numeric_limits<T>::infinity();
        }
      }
      finish_row(i, row, n);
    });
  }
};

// C = alpha A X a query block at a time, for the products that sum over keys: the output
// (A = the weights, X = V) and dQ (A = dS, X = K). A is (Tq, Tk) with row stride Tk, X a
// (Tk, D) operand; query block r sums keys [0, reach) only and fills its rows of C.
template <typename T>
void sum_over_keys(const Blocks& blocks, AttentionPath path, T alpha, const T* A, const Operand& X, int64_t b,
                   int64_t h, int64_t D, T* x_scratch, T* C, int64_t ldc) {
  const int64_t Tk = blocks.Tk;
  const T* x = nullptr;
  int64_t ld = 0;
  for (int64_t r = 0; r < blocks.query_blocks(); ++r) {
    const auto [r0, rows, n] = blocks.query(r);
    if (use_direct(path, rows * D * n)) {
      if (!x) x = rows_of<T>(X, b, h, Tk, D, x_scratch, ld);
      small_gemm(rows, D, n, alpha, A + r0 * Tk, Tk, 1, x, ld, C + r0 * ldc, ldc);
    } else {
      gemm(Transpose::no, X.trans, rows, D, n, alpha, A + r0 * Tk, Tk, X.slice<T>(b, h), X.ld, T(0), C + r0 * ldc,
           ldc);
    }
  }
}

// C = alpha A^T X a key block at a time, for the products that sum over queries: dV (A = Pd,
// X = dO) and dK (A = dS, X = Q). X is a (Tq, D) operand; key block c sums query rows
// [from, Tq) only and fills its rows of C.
template <typename T>
void sum_over_queries(const Blocks& blocks, AttentionPath path, T alpha, const T* A, const Operand& X, int64_t b,
                      int64_t h, int64_t D, T* x_scratch, T* C, int64_t ldc) {
  const int64_t Tq = blocks.Tq, Tk = blocks.Tk;
  const T* x = nullptr;
  int64_t ld = 0;
  for (int64_t c = 0; c < blocks.key_blocks(); ++c) {
    const auto [c0, cols, from] = blocks.key(c);
    const T* a = A + from * Tk + c0;  // read transposed
    if (use_direct(path, cols * D * (Tq - from))) {
      if (!x) x = rows_of<T>(X, b, h, Tq, D, x_scratch, ld);
      small_gemm(cols, D, Tq - from, alpha, a, 1, Tk, x + from * ld, ld, C + c0 * ldc, ldc);
    } else {
      gemm(Transpose::yes, X.trans, cols, D, Tq - from, alpha, a, Tk, row_at<T>(X, b, h, from), X.ld, T(0),
           C + c0 * ldc, ldc);
    }
  }
}

}  // namespace

AttentionForward attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& keep_in,
                                   const Tensor& bias, double scale, const DropoutMask& dropout, AttentionPath path) {
  check_attention_arguments(q_in, k_in, v_in, keep_in, bias);
  check_dropout_probability(dropout.p, kOp);
  const int64_t B = q_in.shape()[0], H = q_in.shape()[1], Tq = q_in.shape()[2], Dk = q_in.shape()[3];
  const int64_t Tk = k_in.shape()[2], Dv = v_in.shape()[3];
  const Shape scores{B, H, Tq, Tk};
  const Operand Q = make_operand(q_in), K = make_operand(k_in), V = make_operand(v_in);
  const Tensor keep = keep_in.defined() ? keep_in.to(q_in.dtype()) : Tensor();
  AttentionForward out{heads_interleaved(B, H, Tq, Dv, q_in.dtype()), Tensor(scores, q_in.dtype()),
                       Tensor(Shape{B, H, Tq}, q_in.dtype()), Tensor(Shape{B, H, Tq}, q_in.dtype())};
  dispatch(q_in.dtype(), [&]<typename T>(T) {
    const ScoreOperand<T> mask(keep, scores), add(bias, scores);
    const T kScale = static_cast<T>(scale);
    const SliceScores<T> masked_scores{Q, K, add, mask, Tq, Tk, Dk, kScale, path};
    const MaskBlocks<T> mask_blocks(mask, Tq, Tk);
    // (b, h) slices are independent: split them over the pool, each piece with its own scratch.
    const double work = 4.0 * static_cast<double>(B * H * Tq * Tk) * static_cast<double>(Dk + Dv);
    parallel_for(B * H, parallel_chunks(B * H, work), [&](int64_t first, int64_t last) {
      std::vector<T> dropped = scratch_if<T>(dropout.active(), Tq * Tk);
      std::vector<T> k_columns = scratch_if<T>(masked_scores.needs_k_columns(), Dk * Tk);
      std::vector<T> v_rows = scratch_if<T>(path != AttentionPath::blas && V.trans == Transpose::yes, Tk * Dv);
      for (int64_t slice = first; slice < last; ++slice) {
        const int64_t b = slice / H, h = slice % H;
        T* P = out.weights.data<T>() + slice * Tq * Tk;
        T* row_max = out.row_max.data<T>() + slice * Tq;
        T* row_sum = out.row_sum.data<T>() + slice * Tq;
        std::optional<Blocks> own;
        const Blocks& blocks = mask_blocks.of(b, h, own);
        // P = softmax of the masked scores, keeping each row's statistics for the backward.
        masked_scores.compute(b, h, blocks, k_columns.data(), P, [&](int64_t i, T* row, int64_t n) {
          softmax_row(row, row, n, row_max[i], row_sum[i]);
        });
        const T* weights = P;
        if (dropout.active()) {
          drop(P, dropped.data(), Tq * Tk, static_cast<uint64_t>(slice * Tq * Tk), dropout);
          weights = dropped.data();
        }
        sum_over_keys(blocks, path, T(1), weights, V, b, h, Dv, v_rows.data(), interleaved_slice<T>(out.output, b, h),
                      H * Dv);
      }
    });
  });
  return out;
}

namespace {

// The backward of both entry points. The weights of a slice come from `weights` (B, H, Tq, Tk,
// contiguous) when it is defined, else they are recomputed from q, k, keep, bias and the row
// statistics into scratch. Operands are checked by the callers.
AttentionGrads backward_slices(const Tensor& g_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                               const Tensor& weights, const Tensor& keep_in, const Tensor& bias,
                               const Tensor& row_max_in, const Tensor& row_sum_in, const Shape& scores, double scale,
                               const DropoutMask& dropout, bool want_q, bool want_k, bool want_v, bool want_scores,
                               AttentionPath path) {
  const bool recompute = !weights.defined();
  const bool want_scores_path = want_q || want_k || want_scores;
  const int64_t B = scores[0], H = scores[1], Tq = scores[2], Tk = scores[3];
  const int64_t Dv = g_in.shape()[3];
  const int64_t Dk = want_q || recompute ? k_in.shape()[3] : want_k ? q_in.shape()[3] : 0;
  const DType dtype = g_in.dtype();
  AttentionGrads out;
  if (want_q) out.dq = heads_interleaved(B, H, Tq, Dk, dtype);
  if (want_k) out.dk = heads_interleaved(B, H, Tk, Dk, dtype);
  if (want_v) out.dv = heads_interleaved(B, H, Tk, Dv, dtype);
  if (want_scores) out.dscores = Tensor(scores, dtype);
  if (!want_v && !want_scores_path) return out;
  const Operand G = make_operand(g_in);
  const Operand Q = want_k || recompute ? make_operand(q_in) : Operand{};
  const Operand K = want_q || recompute ? make_operand(k_in) : Operand{};
  const Operand V = want_scores_path ? make_operand(v_in) : Operand{};
  const Tensor keep = recompute && keep_in.defined() ? keep_in.to(dtype) : Tensor();
  const Tensor row_max = recompute ? row_max_in.contiguous() : Tensor();
  const Tensor row_sum = recompute ? row_sum_in.contiguous() : Tensor();
  dispatch(dtype, [&]<typename T>(T) {
    const T kScale = static_cast<T>(scale);
    const ScoreOperand<T> mask(keep, scores), add(recompute ? bias : Tensor(), scores);
    // The forward's scores, on the forward's paths and blocks.
    const SliceScores<T> masked_scores{Q, K, add, mask, Tq, Tk, Dk, kScale, path};
    const MaskBlocks<T> mask_blocks(mask, Tq, Tk);
    const int64_t slice_elems = Tq * Tk;
    const bool may_direct = path != AttentionPath::blas;
    const double work = 2.0 * static_cast<double>(B * H * Tq * Tk) *
                        static_cast<double>(Dv + 2 * Dk + Dv + (recompute ? Dk : 0));
    parallel_for(B * H, parallel_chunks(B * H, work), [&](int64_t first, int64_t last) {
      std::vector<T> recomputed = scratch_if<T>(recompute, slice_elems);
      std::vector<T> k_columns = scratch_if<T>(recompute && masked_scores.needs_k_columns(), Dk * Tk);
      std::vector<T> dropped = scratch_if<T>(dropout.active() && want_v, slice_elems);
      std::vector<T> scratch = scratch_if<T>(want_scores_path && !want_scores, slice_elems);
      std::vector<T> g_rows = scratch_if<T>(want_v && may_direct && G.trans == Transpose::yes, Tq * Dv);
      std::vector<T> v_columns = scratch_if<T>(want_scores_path && may_direct && V.trans == Transpose::no, Dv * Tk);
      std::vector<T> k_rows = scratch_if<T>(want_q && may_direct && K.trans == Transpose::yes, Tk * Dk);
      std::vector<T> q_rows = scratch_if<T>(want_k && may_direct && Q.trans == Transpose::yes, Tq * Dk);
      for (int64_t slice = first; slice < last; ++slice) {
        const int64_t b = slice / H, h = slice % H;
        const uint64_t base = static_cast<uint64_t>(slice * Tq * Tk);
        const T* P = recompute ? recomputed.data() : weights.data<T>() + slice * Tq * Tk;
        if (recompute) {  // P (Tq, Tk) = the forward's weights of this slice, again
          const T* max_of = row_max.data<T>() + slice * Tq;
          const T* sum_of = row_sum.data<T>() + slice * Tq;
          std::optional<Blocks> own;
          const auto softmax = [&](int64_t i, T* row, int64_t n) {
            softmax_row_from(row, row, n, max_of[i], sum_of[i]);
          };
          masked_scores.compute(b, h, mask_blocks.of(b, h, own), k_columns.data(), recomputed.data(), softmax);
        }
        // The products below skip what the weights leave at zero. Their blocks come from P on
        // both entry points, so given and recomputed weights take the same paths and bits.
        const Blocks blocks = weight_blocks(P, Tq, Tk);
        if (want_v) {  // dV = Pd^T dO
          const T* Pd = P;
          if (dropout.active()) {
            drop(P, dropped.data(), Tq * Tk, base, dropout);
            Pd = dropped.data();
          }
          sum_over_queries(blocks, path, T(1), Pd, G, b, h, Dv, g_rows.data(), interleaved_slice<T>(out.dv, b, h),
                           H * Dv);
        }
        if (!want_scores_path) continue;
        T* dS = want_scores ? out.dscores.data<T>() + slice * Tq * Tk : scratch.data();
        // dPd = dO V^T, then dS row by row.
        with_every_key(blocks, path, T(1), G, V, b, h, Dv, v_columns.data(), dS, [&](int64_t i, T* d, int64_t n) {
          const T* p = P + i * Tk;
          if (dropout.active()) drop(d, d, n, base + static_cast<uint64_t>(i * Tk), dropout);
          // Masked keys and fully masked rows have p = 0, so their score gradient is exactly 0.
          const T dot = row_dot(d, p, n);
          for (int64_t j = 0; j < n; ++j) d[j] = p[j] * (d[j] - dot);
        });
        if (want_q) {  // dQ = scale dS K
          sum_over_keys(blocks, path, kScale, dS, K, b, h, Dk, k_rows.data(), interleaved_slice<T>(out.dq, b, h),
                        H * Dk);
        }
        if (want_k) {  // dK = scale dS^T Q
          sum_over_queries(blocks, path, kScale, dS, Q, b, h, Dk, q_rows.data(), interleaved_slice<T>(out.dk, b, h),
                           H * Dk);
        }
      }
    });
  });
  return out;
}

}  // namespace

AttentionGrads attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& keep, const Tensor& bias, const Tensor& row_max,
                                  const Tensor& row_sum, double scale, const DropoutMask& dropout, bool want_q,
                                  bool want_k, bool want_v, bool want_scores, AttentionPath path) {
  check_attention_backward(g, q, k, v, keep, bias, row_max, row_sum, want_q || want_k || want_scores);
  const Shape scores{q.shape()[0], q.shape()[1], q.shape()[2], k.shape()[2]};
  return backward_slices(g, q, k, v, Tensor(), keep, bias, row_max, row_sum, scores, scale, dropout, want_q, want_k,
                         want_v, want_scores, path);
}

AttentionGrads attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& weights, double scale, const DropoutMask& dropout, bool want_q,
                                  bool want_k, bool want_v, bool want_scores, AttentionPath path) {
  check_attention_backward(g, q, k, v, weights, want_q, want_k, want_scores);
  return backward_slices(g, q, k, v, weights.contiguous(), Tensor(), Tensor(), Tensor(), Tensor(), weights.shape(),
                         scale, dropout, want_q, want_k, want_v, want_scores, path);
}

}  // namespace ag::kernels

namespace ag {

AttentionResult scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const Tensor& keep, const Variable& bias,
                                             const AttentionOptions& options) {
  const Tensor bias_val = bias.defined() ? bias.value() : Tensor();
  kernels::check_attention_arguments(q.value(), k.value(), v.value(), keep, bias_val);
  kernels::check_dropout_probability(options.dropout, "scaled_dot_product_attention");
  const int64_t depth = q.shape()[3];
  if (!(options.scale >= 0.0) || !std::isfinite(options.scale) || (options.scale == 0.0 && depth == 0)) {
    throw std::invalid_argument("scaled_dot_product_attention: scale must be finite and >= 0 (0 means 1 / sqrt(Dk)), "
                                "got " + std::to_string(options.scale) + " with q=" + q.shape().str());
  }
  const double scale = options.scale > 0.0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(depth));
  kernels::DropoutMask mask;
  if (options.training && options.dropout > 0.0) {
    Generator& gen = options.generator ? *options.generator : default_generator();
    mask = kernels::DropoutMask{options.dropout, gen.next_stream()};
  }
  kernels::AttentionForward f =
      kernels::attention_forward(q.value(), k.value(), v.value(), keep, bias_val, scale, mask);

  // The weights come back from q, k, keep, bias and the row statistics; dq, dk and dbias all
  // go through d scores, which reads v.
  const bool through_scores = any_requires_grad({q, k, bias});
  const bool any = through_scores || any_requires_grad({v});
  const Tensor q_saved = any ? q.value() : Tensor();
  const Tensor k_saved = any ? k.value() : Tensor();
  const Tensor v_saved = through_scores ? v.value() : Tensor();
  const Tensor keep_saved = any ? keep : Tensor();
  const Tensor bias_saved = any ? bias_val : Tensor();
  const Tensor row_max = any ? std::move(f.row_max) : Tensor();
  const Tensor row_sum = any ? std::move(f.row_sum) : Tensor();
  const Shape bias_shape = bias.defined() ? bias.shape() : Shape();
  Variable output = make_result(
      "scaled_dot_product_attention", std::move(f.output), {q, k, v, bias},
      [q_saved, k_saved, v_saved, keep_saved, bias_saved, row_max, row_sum, scale, mask,
       bias_shape](const Tensor& g, GradSink& grads) {
        kernels::AttentionGrads d =
            kernels::attention_backward(g, q_saved, k_saved, v_saved, keep_saved, bias_saved, row_max, row_sum, scale,
                                        mask, grads.wants(0), grads.wants(1), grads.wants(2), grads.wants(3));
        if (grads.wants(0)) grads.add(0, d.dq);
        if (grads.wants(1)) grads.add(1, d.dk);
        if (grads.wants(2)) grads.add(2, d.dv);
        if (grads.wants(3)) grads.add(3, kernels::sum_to(d.dscores, bias_shape));
      });
  return {std::move(output), std::move(f.weights)};
}

}  // namespace ag
