// scaled_dot_product_attention: scores, mask, softmax, dropout and the value product fused,
// with a hand-written backward. Per (batch, head) slice:
//
//   forward                                           backward (Pd = dropout(P), dPd = dO V^T)
//   S  = scale Q K^T + bias, -inf where masked (Tq, Tk)   dV = Pd^T dO                    (Tk, Dv)
//   P  = softmax over keys (an empty row is all 0)         dP = dropout(dPd)               (Tq, Tk)
//   O  = dropout(P) V                        (Tq, Dv)      dS = P * (dP - rowsum(dP * P))  (Tq, Tk)
//                                                          dQ = scale dS K                 (Tq, Dk)
//                                                          dK = scale dS^T Q               (Tk, Dk)
//
// Grouped-query attention: k and v may have H_kv heads for q's H, each shared by the G = H / H_kv
// query heads h with h / G equal to it. Slice (b, h) reads key/value head h / G in place (no
// copy per query head), and the backward sums the group's dK and dV into that head, one query
// head after another in a fixed order, so the bits do not depend on threads.
//
// The mask reaches the kernel as its structure (autograd/attention_mask.h): each query row
// sees a prefix of the keys (causal: q + offset + 1 of them, key padding: the sequence's
// length), within which only a keep pattern, if one was given, hides keys one by one. So P is
// a prefix matrix and the products skip what lies past each row's reach, 32 rows at a time
// (core/prefix_gemm.h owns that blocking and the BLAS / direct-loop plumbing).
//
// Saved for the backward: q and k, v when a gradient goes through the scores, the mask and
// bias as given, the dropout key, and two softmax statistics per query row (B, H, Tq) -- not
// the weights (B, H, Tq, Tk). The backward recomputes each slice's P from these into scratch
// with the forward's own code and blocks, so they are the forward's bits: one more Q K^T per
// slice buys back the largest activation of a transformer layer. The dropout mask is
// regenerated from its key rather than stored.
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/attention_slices.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/parallel.h"

namespace ag::kernels {

using namespace attention_slices;

namespace {

// S of one (b, h) slice, masked, block by block; each row goes to finish_row(i, row, n) with
// its first n entries final (the softmax, in place). Forward and backward both call this, with
// the same blocks, so both get the same bits.
template <typename T>
struct Scores {
  Operand Q, K;
  BiasRows<T> bias;
  const MaskRows& mask;
  int64_t Dk;
  T scale;
  PrefixPath path;

  // The direct loops read K^T with unit-strided rows: a copy unless K is a transposed view.
  bool needs_k_columns() const { return path != PrefixPath::blas && K.trans == Transpose::no; }

  // Query head h reads key head h / group.
  template <typename FinishRow>
  void compute(int64_t b, int64_t h, int64_t group, const SliceRows& rows, T* k_columns, T* S,
               FinishRow&& finish_row) const {
    prefix_gemm_abt(*rows.blocks, path, scale, Q.at<T>(b, h), K.at<T>(b, h / group), Dk, k_columns, S,
                    [&](int64_t i, T* s, int64_t n) {
                      bias.add(b, h, i, s, n);
                      mask.hide(b, h, i, rows, s, n);
                      finish_row(i, s, n);
                    });
  }
};

}  // namespace

// q: (B, H, Tq, Dk), k: (B, H_kv, Tk, Dk), v: (B, H_kv, Tk, Dv) -> output (B, H, Tq, Dv),
// weights (B, H, Tq, Tk), row_max and row_sum (B, H, Tq).
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                                   const Tensor& bias, double scale, const DropoutMask& dropout, PrefixPath path) {
  const int64_t B = q.shape()[0], H = q.shape()[1], Tq = q.shape()[2], Dk = q.shape()[3];
  const int64_t Tk = k.shape()[2], Dv = v.shape()[3], G = H / k.shape()[1];
  const DType dtype = q.dtype();
  AttentionForward out{heads_interleaved(B, H, Tq, Dv, dtype), Tensor(Shape{B, H, Tq, Tk}, dtype),
                       Tensor(Shape{B, H, Tq}, dtype), Tensor(Shape{B, H, Tq}, dtype)};
  const MaskRows mask_rows(mask, Tq, Tk);
  dispatch(dtype, [&]<typename T>(T) {
    const Scores<T> scores{Operand(q), Operand(k), BiasRows<T>(bias, out.weights.shape()), mask_rows, Dk,
                           static_cast<T>(scale), path};
    const Operand V(v);
    const double work = 4.0 * static_cast<double>(B * H * Tq * Tk) * static_cast<double>(Dk + Dv);
    parallel_for(B * H, parallel_chunks(B * H, work), [&](int64_t first, int64_t last) {
      std::vector<T> k_columns = scratch_if<T>(scores.needs_k_columns(), Dk * Tk);
      std::vector<T> v_rows = scratch_if<T>(path != PrefixPath::blas && V.trans == Transpose::yes, Tk * Dv);
      std::vector<T> dropped = scratch_if<T>(dropout.active(), Tq * Tk);
      SliceRows own;
      for (int64_t slice = first; slice < last; ++slice) {
        const int64_t b = slice / H, h = slice % H;
        const SliceRows& rows = mask_rows.of(b, h, own);
        T* P = out.weights.data<T>() + slice * Tq * Tk;
        T* row_max = out.row_max.data<T>() + slice * Tq;
        T* row_sum = out.row_sum.data<T>() + slice * Tq;
        // P = softmax(S), keeping each row's max and sum for the backward.
        scores.compute(b, h, G, rows, k_columns.data(), P,
                       [&](int64_t i, T* s, int64_t n) { softmax_row(s, s, n, row_max[i], row_sum[i]); });
        const T* Pd = P;
        if (dropout.active()) {
          drop(P, dropped.data(), Tq * Tk, static_cast<uint64_t>(slice * Tq * Tk), dropout);
          Pd = dropped.data();
        }
        // O = Pd V
        prefix_gemm_ab(*rows.blocks, path, T(1), Pd, V.at<T>(b, h / G), Dv, v_rows.data(),
                       interleaved_slice<T>(out.output, b, h), H * Dv);
      }
    });
  });
  return out;
}

namespace {

// The backward of both entry points: P of a slice comes from `weights` (B, H, Tq, Tk,
// contiguous) when it is defined, else it is recomputed from q, k, the mask, the bias and the
// row statistics into scratch. Operands are checked by the callers.
AttentionGrads backward_slices(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& weights, const AttentionMask& mask, const Tensor& bias,
                               const Tensor& row_max_in, const Tensor& row_sum_in, const Shape& scores_shape,
                               double scale, const DropoutMask& dropout, bool want_q, bool want_k, bool want_v,
                               bool want_scores, PrefixPath path) {
  const bool recompute = !weights.defined();
  const bool through_scores = want_q || want_k || want_scores;
  const int64_t B = scores_shape[0], H = scores_shape[1], Tq = scores_shape[2], Tk = scores_shape[3];
  const int64_t Dv = g.shape()[3];
  const int64_t Dk = want_q || recompute ? k.shape()[3] : want_k ? q.shape()[3] : 0;
  // Key/value heads: from k (saved whenever anything is wanted by the op), else v.
  const int64_t Hkv = k.defined() ? k.shape()[1] : v.defined() ? v.shape()[1] : H, G = H / Hkv;
  const DType dtype = g.dtype();
  AttentionGrads out;
  if (want_q) out.dq = heads_interleaved(B, H, Tq, Dk, dtype);
  if (want_k) out.dk = heads_interleaved(B, Hkv, Tk, Dk, dtype);
  if (want_v) out.dv = heads_interleaved(B, Hkv, Tk, Dv, dtype);
  if (want_scores) out.dscores = Tensor(scores_shape, dtype);
  if (!want_v && !through_scores) return out;
  const Operand G_(g);
  const Operand Q = want_k || recompute ? Operand(q) : Operand();
  const Operand K = want_q || recompute ? Operand(k) : Operand();
  const Operand V = through_scores ? Operand(v) : Operand();
  const Tensor row_max = recompute ? row_max_in.contiguous() : Tensor();
  const Tensor row_sum = recompute ? row_sum_in.contiguous() : Tensor();
  const MaskRows mask_rows(mask, Tq, Tk);
  dispatch(dtype, [&]<typename T>(T) {
    const T kScale = static_cast<T>(scale);
    const Scores<T> scores{Q, K, BiasRows<T>(recompute ? bias : Tensor(), scores_shape), mask_rows, Dk, kScale, path};
    const bool direct = path != PrefixPath::blas;
    const double work =
        2.0 * static_cast<double>(B * H * Tq * Tk) * static_cast<double>(Dv + 2 * Dk + Dv + (recompute ? Dk : 0));
    // One task per key/value head: its G query heads add into its dK and dV in turn.
    parallel_for(B * Hkv, parallel_chunks(B * Hkv, work), [&](int64_t first, int64_t last) {
      const int64_t n = Tq * Tk;
      std::vector<T> recomputed = scratch_if<T>(recompute, n);
      std::vector<T> k_columns = scratch_if<T>(recompute && scores.needs_k_columns(), Dk * Tk);
      std::vector<T> dropped = scratch_if<T>(dropout.active() && want_v, n);
      std::vector<T> d_scores = scratch_if<T>(through_scores && !want_scores, n);
      std::vector<T> g_rows = scratch_if<T>(want_v && direct && G_.trans == Transpose::yes, Tq * Dv);
      std::vector<T> v_columns = scratch_if<T>(through_scores && direct && V.trans == Transpose::no, Dv * Tk);
      std::vector<T> k_rows = scratch_if<T>(want_q && direct && K.trans == Transpose::yes, Tk * Dk);
      std::vector<T> q_rows = scratch_if<T>(want_k && direct && Q.trans == Transpose::yes, Tq * Dk);
      // The second and later query heads of a group: their dK / dV before they are added.
      std::vector<T> group_dk = scratch_if<T>(want_k && G > 1, Tk * Dk);
      std::vector<T> group_dv = scratch_if<T>(want_v && G > 1, Tk * Dv);
      SliceRows own;
      for (int64_t kv_slice = first; kv_slice < last; ++kv_slice) {
        const int64_t b = kv_slice / Hkv, hk = kv_slice % Hkv;
        T* dk_head = want_k ? interleaved_slice<T>(out.dk, b, hk) : nullptr;
        T* dv_head = want_v ? interleaved_slice<T>(out.dv, b, hk) : nullptr;
        for (int64_t h = hk * G; h < (hk + 1) * G; ++h) {
          const int64_t slice = b * H + h;
          const bool first_of_group = h == hk * G;
          const uint64_t base = static_cast<uint64_t>(slice * n);
          // P: the forward's weights of this slice, again (the same code, blocks and bits), or
          // the given ones, whose blocks come from where they are nonzero.
          const T* P = recompute ? recomputed.data() : weights.data<T>() + slice * n;
          std::optional<PrefixBlocks> given;
          const PrefixBlocks* blocks = nullptr;
          if (recompute) {
            const SliceRows& rows = mask_rows.of(b, h, own);
            const T* max_of = row_max.data<T>() + slice * Tq;
            const T* sum_of = row_sum.data<T>() + slice * Tq;
            scores.compute(b, h, G, rows, k_columns.data(), recomputed.data(),
                           [&](int64_t i, T* s, int64_t len) { softmax_row_from(s, s, len, max_of[i], sum_of[i]); });
            blocks = &*rows.blocks;
          } else {
            blocks = &given.emplace(blocks_of_nonzeros(P, Tq, Tk));
          }
          if (want_v) {  // dV = Pd^T dO, summed over the group
            const T* Pd = P;
            if (dropout.active()) {
              drop(P, dropped.data(), n, base, dropout);
              Pd = dropped.data();
            }
            if (first_of_group) {
              prefix_gemm_atb(*blocks, path, T(1), Pd, G_.at<T>(b, h), Dv, g_rows.data(), dv_head, Hkv * Dv);
            } else {
              prefix_gemm_atb(*blocks, path, T(1), Pd, G_.at<T>(b, h), Dv, g_rows.data(), group_dv.data(), Dv);
              add_matrix(dv_head, Hkv * Dv, group_dv.data(), Tk, Dv);
            }
          }
          if (!through_scores) continue;
          // dPd = dO V^T, then row by row dP = dropout(dPd) and dS = P * (dP - rowsum(dP * P)).
          // Hidden keys and empty rows have P = 0, so their score gradient is exactly 0.
          T* dS = want_scores ? out.dscores.data<T>() + slice * n : d_scores.data();
          prefix_gemm_abt(*blocks, path, T(1), G_.at<T>(b, h), V.at<T>(b, hk), Dv, v_columns.data(), dS,
                          [&](int64_t i, T* d, int64_t len) {
                            const T* p = P + i * Tk;
                            if (dropout.active()) drop(d, d, len, base + static_cast<uint64_t>(i * Tk), dropout);
                            const T dot = row_dot(d, p, len);
                            for (int64_t j = 0; j < len; ++j) d[j] = p[j] * (d[j] - dot);
                          });
          if (want_q) {  // dQ = scale dS K
            prefix_gemm_ab(*blocks, path, kScale, dS, K.at<T>(b, hk), Dk, k_rows.data(),
                           interleaved_slice<T>(out.dq, b, h), H * Dk);
          }
          if (want_k) {  // dK = scale dS^T Q, summed over the group
            if (first_of_group) {
              prefix_gemm_atb(*blocks, path, kScale, dS, Q.at<T>(b, h), Dk, q_rows.data(), dk_head, Hkv * Dk);
            } else {
              prefix_gemm_atb(*blocks, path, kScale, dS, Q.at<T>(b, h), Dk, q_rows.data(), group_dk.data(), Dk);
              add_matrix(dk_head, Hkv * Dk, group_dk.data(), Tk, Dk);
            }
          }
        }
      }
    });
  });
  return out;
}

}  // namespace

AttentionGrads attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionMask& mask, const Tensor& bias, const Tensor& row_max,
                                  const Tensor& row_sum, double scale, const DropoutMask& dropout, bool want_q,
                                  bool want_k, bool want_v, bool want_scores, PrefixPath path) {
  check_attention_backward(g, q, k, v, row_max, row_sum, want_q || want_k || want_scores);
  const Shape scores{q.shape()[0], q.shape()[1], q.shape()[2], k.shape()[2]};
  return backward_slices(g, q, k, v, Tensor(), mask, bias, row_max, row_sum, scores, scale, dropout, want_q, want_k,
                         want_v, want_scores, path);
}

AttentionGrads attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& weights, double scale, const DropoutMask& dropout, bool want_q,
                                  bool want_k, bool want_v, bool want_scores, PrefixPath path) {
  check_attention_backward(g, q, k, v, weights, want_q, want_k, want_scores);
  return backward_slices(g, q, k, v, weights.contiguous(), AttentionMask(), Tensor(), Tensor(), Tensor(),
                         weights.shape(), scale, dropout, want_q, want_k, want_v, want_scores, path);
}

}  // namespace ag::kernels

namespace ag {

AttentionResult scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const AttentionMask& mask, const Variable& bias,
                                             const AttentionOptions& options) {
  // The one check of everything the call was given; the kernels below trust it.
  const Tensor bias_value = bias.defined() ? bias.value() : Tensor();
  const double scale = kernels::check_attention_arguments(q.value(), k.value(), v.value(), mask, bias_value, options);
  kernels::DropoutMask dropout;
  if (options.training && options.dropout > 0.0) {
    Generator& gen = options.generator ? *options.generator : default_generator();
    dropout = kernels::DropoutMask{options.dropout, gen.next_stream()};
  }
  kernels::AttentionForward f =
      kernels::attention_forward(q.value(), k.value(), v.value(), mask, bias_value, scale, dropout);

  // P comes back from q, k, the mask, the bias and the row statistics; dq, dk and dbias all go
  // through dS, which reads v.
  const bool through_scores = any_requires_grad({q, k, bias});
  const bool any = through_scores || any_requires_grad({v});
  const Tensor q_saved = any ? q.value() : Tensor();
  const Tensor k_saved = any ? k.value() : Tensor();
  const Tensor v_saved = through_scores ? v.value() : Tensor();
  const AttentionMask mask_saved = any ? mask : AttentionMask();
  const Tensor bias_saved = any ? bias_value : Tensor();
  const Tensor row_max = any ? std::move(f.row_max) : Tensor();
  const Tensor row_sum = any ? std::move(f.row_sum) : Tensor();
  const Shape bias_shape = bias.defined() ? bias.shape() : Shape();
  Variable output = make_result(
      "scaled_dot_product_attention", std::move(f.output), {q, k, v, bias},
      [q_saved, k_saved, v_saved, mask_saved, bias_saved, row_max, row_sum, scale, dropout,
       bias_shape](const Tensor& g, GradSink& grads) {
        kernels::AttentionGrads d =
            kernels::attention_backward(g, q_saved, k_saved, v_saved, mask_saved, bias_saved, row_max, row_sum,
                                        scale, dropout, grads.wants(0), grads.wants(1), grads.wants(2), grads.wants(3));
        if (grads.wants(0)) grads.add(0, d.dq);
        if (grads.wants(1)) grads.add(1, d.dk);
        if (grads.wants(2)) grads.add(2, d.dv);
        if (grads.wants(3)) grads.add(3, kernels::sum_to(d.dscores, bias_shape));
      });
  return {std::move(output), std::move(f.weights)};
}

}  // namespace ag
