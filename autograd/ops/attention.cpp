// scaled_dot_product_attention: scores, mask, softmax, dropout and the value product fused,
// with a hand-written backward (kernels::attention_backward). Saved: the weights (before
// dropout), the dropout key, and of q, k, v only those a wanted gradient reads.
//
// The kernels:
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
#include <algorithm>
#include <cmath>
#include <limits>
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

namespace ag {

void check_attention_operands(const Tensor& q, const Tensor& k, const Tensor& v, const std::string& op) {
  if (!q.defined() || !k.defined() || !v.defined()) {
    throw std::invalid_argument(op + ": q, k and v must all be defined");
  }
  const std::string shapes = "q=" + q.shape().str() + " k=" + k.shape().str() + " v=" + v.shape().str();
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) {
    throw std::invalid_argument(op + ": q, k and v must be 4-D (B, H, T, D): " + shapes);
  }
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype()) {
    throw std::invalid_argument(op + ": dtypes differ: q=" + dtype_name(q.dtype()) + " k=" +
                                dtype_name(k.dtype()) + " v=" + dtype_name(v.dtype()) + " (" + shapes + ")");
  }
  if (q.shape()[0] != k.shape()[0] || q.shape()[0] != v.shape()[0] || q.shape()[1] != k.shape()[1] ||
      q.shape()[1] != v.shape()[1]) {
    throw std::invalid_argument(op + ": batch and head dimensions (B, H) differ: " + shapes);
  }
  if (q.shape()[3] != k.shape()[3]) {
    throw std::invalid_argument(op + ": query and key depths Dk differ: " + shapes);
  }
  if (k.shape()[2] != v.shape()[2]) {
    throw std::invalid_argument(op + ": key and value lengths Tk differ: " + shapes);
  }
}

}  // namespace ag

namespace ag::kernels {

using namespace attention_slices;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// One row of scores -> attention weights in place: add the bias, set masked keys to -inf, then
// the row softmax every softmax shares (core/vec_math.h); a row with no kept key becomes zero.
template <typename T>
void weights_row(T* row, int64_t n, const ScoreOperand<T>& add, const ScoreOperand<T>& mask, int64_t b, int64_t h,
                 int64_t i) {
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
  softmax_row(row, row, n);
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

}  // namespace

void check_attention_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& keep,
                               const Tensor& bias) {
  check_attention_operands(q, k, v, kOp);
  const std::string shapes = "q=" + q.shape().str() + " k=" + k.shape().str() + " v=" + v.shape().str();
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
      std::vector<T> k_columns = scratch_if<T>(direct_scores && K.trans == Transpose::no, Dk * Tk);
      std::vector<T> v_rows = scratch_if<T>(direct_output && V.trans == Transpose::yes, Tk * Dv);
      for (int64_t slice = first; slice < last; ++slice) {
        const int64_t b = slice / H, h = slice % H;
        T* P = out.weights.data<T>() + slice * Tq * Tk;
        if (direct_scores) {
          int64_t ld = 0;
          const T* kt = columns_of<T>(K, b, h, Tk, Dk, k_columns.data(), ld);
          small_gemm(Tq, Tk, Dk, kScale, Q.slice<T>(b, h), row_stride(Q), col_stride(Q), kt, ld, P, Tk);
        } else {
          gemm(Q.trans, flipped(K.trans), Tq, Tk, Dk, kScale, Q.slice<T>(b, h), Q.ld, K.slice<T>(b, h), K.ld,
                  T(0), P, Tk);
        }
        for (int64_t i = 0; i < Tq; ++i) weights_row(P + i * Tk, Tk, add, mask, b, h, i);
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
          gemm(Transpose::no, V.trans, Tq, Dv, Tk, T(1), weights, Tk, V.slice<T>(b, h), V.ld, T(0), O, H * Dv);
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
      std::vector<T> g_rows = scratch_if<T>(want_v && direct_v && G.trans == Transpose::yes, Tq * Dv);
      std::vector<T> v_columns =
          scratch_if<T>(want_scores_path && direct_scores && V.trans == Transpose::no, Dv * Tk);
      std::vector<T> k_rows = scratch_if<T>(want_q && direct_q && K.trans == Transpose::yes, Tk * Dk);
      std::vector<T> q_rows = scratch_if<T>(want_k && direct_k && Q.trans == Transpose::yes, Tq * Dk);
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
            gemm(Transpose::yes, G.trans, Tk, Dv, Tq, T(1), Pd, Tk, dO, G.ld, T(0), dV, H * Dv);
          }
        }
        if (!want_scores_path) continue;
        T* dS = want_scores ? out.dscores.data<T>() + slice * Tq * Tk : scratch.data();
        if (direct_scores) {  // dPd = dO V^T
          int64_t ld = 0;
          const T* vt = columns_of<T>(V, b, h, Tk, Dv, v_columns.data(), ld);
          small_gemm(Tq, Tk, Dv, T(1), dO, row_stride(G), col_stride(G), vt, ld, dS, Tk);
        } else {
          gemm(G.trans, flipped(V.trans), Tq, Tk, Dv, T(1), dO, G.ld, V.slice<T>(b, h), V.ld, T(0), dS, Tk);
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
            gemm(Transpose::no, K.trans, Tq, Dk, Tk, kScale, dS, Tk, K.slice<T>(b, h), K.ld, T(0), dQ, H * Dk);
          }
        }
        if (want_k) {
          T* dK = interleaved_slice<T>(out.dk, b, h);
          if (direct_k) {  // dK = scale dS^T Q: A = dS read transposed
            int64_t ld = 0;
            const T* qr = rows_of<T>(Q, b, h, Tq, Dk, q_rows.data(), ld);
            small_gemm(Tk, Dk, Tq, kScale, dS, 1, Tk, qr, ld, dK, H * Dk);
          } else {
            gemm(Transpose::yes, Q.trans, Tk, Dk, Tq, kScale, dS, Tk, Q.slice<T>(b, h), Q.ld, T(0), dK, H * Dk);
          }
        }
      }
    });
  });
  return out;
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

  // dq reads k, dk reads q; dq, dk and dbias all go through d scores, which reads v.
  const bool gq = any_requires_grad({q}), gk = any_requires_grad({k});
  const bool through_scores = gq || gk || any_requires_grad({bias});
  const bool any = through_scores || any_requires_grad({v});
  const Tensor q_saved = gk ? q.value() : Tensor();
  const Tensor k_saved = gq ? k.value() : Tensor();
  const Tensor v_saved = through_scores ? v.value() : Tensor();
  const Tensor weights = any ? f.weights : Tensor();
  const Shape bias_shape = bias.defined() ? bias.shape() : Shape();
  Variable output = make_result(
      "scaled_dot_product_attention", std::move(f.output), {q, k, v, bias},
      [q_saved, k_saved, v_saved, weights, scale, mask, bias_shape](const Tensor& g, GradSink& grads) {
        kernels::AttentionGrads d = kernels::attention_backward(g, q_saved, k_saved, v_saved, weights, scale, mask,
                                                                grads.wants(0), grads.wants(1), grads.wants(2),
                                                                grads.wants(3));
        if (grads.wants(0)) grads.add(0, d.dq);
        if (grads.wants(1)) grads.add(1, d.dk);
        if (grads.wants(2)) grads.add(2, d.dv);
        if (grads.wants(3)) grads.add(3, kernels::sum_to(d.dscores, bias_shape));
      });
  return {std::move(output), std::move(f.weights)};
}

}  // namespace ag
