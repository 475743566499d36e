// Fused neural-network ops: forward and hand-written backward in one kernel each, for speed
// and memory. Each has a composed twin built from the primitives in ops.h, and tests hold the
// two equal (autograd/composed.h, tests/autograd/test_nn_ops.cpp); each op's forward and
// backward kernels live side by side in autograd/ops/<op>.cpp.
// Bad input throws std::invalid_argument naming the op and every shape or value involved.
#pragma once

#include <cstdint>
#include <string>

#include "attograd/autograd/attention_mask.h"
#include "attograd/autograd/variable.h"
#include "attograd/core/indices.h"
#include "attograd/core/quantize.h"
#include "attograd/core/rng.h"

namespace ag {

// ---- linear (ops/linear.cpp) ----
// x: (..., in), weight: (out, in), bias: (out,) or undefined -> (..., out) = x W^T + b.
// One product with the bias added inside it; the leading axes of x fold into one (rows, in)
// matrix, so the weight gradient is one product over all rows. Composed twin:
// matmul(x, transpose(weight, 0, 1)) + bias. Saves x (contiguous) for dW and W for dx.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = Variable());

// ---- quantized_linear (ops/quantized_linear.cpp): linear with quantized weights, inference only ----
// x: (..., in) f32, q: the int8 or q4_0 form of `weight` (out, in) (core/quantize.h), bias: (out,) or
// undefined -> (..., out) = x dequantize(q)^T + b, without reading weight's float values. The
// twin is linear(x, dequantize(q), bias). It has no backward: std::logic_error naming weight
// (its dotted name, "blocks.0.attn.w_q.weight") when grad mode is on and x, weight or bias
// requires grad; std::invalid_argument when weight is not f32 of q's shape (a model converted
// with to(f64) after quantizing) and for the shapes linear refuses.
Variable quantized_linear(const Variable& x, const QuantizedMatrix& q, const Variable& weight, const Variable& bias = Variable());

// ---- layer norm (ops/layer_norm.cpp) ----
// x: (..., *normalized) -> same shape, normalised over the last `normalized_dims` axes.
// weight, bias: shape `normalized` (either may be undefined: no affine part).
// Biased variance, eps inside the square root (PyTorch's F.layer_norm); eps >= 0.
// Saves x (made contiguous once) and the row statistics mean and rstd = 1 / sqrt(var + eps);
// backward rebuilds x-hat from them.
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, int64_t normalized_dims,
                    double eps = 1e-5);

// ---- rms norm (ops/rms_norm.cpp) ----
// x: (..., n) -> same shape, y = x / sqrt(mean over the last axis of x^2 + eps) * weight.
// weight: (n,) or undefined (no scale). Llama's RMSNorm (Hugging Face's LlamaRMSNorm: the
// mean of squares, eps inside the square root, then the weight). Saves x (contiguous) and one
// rstd per row. Composed twin: x * pow(mean(x * x, {-1}, true) + eps, -0.5) * weight.
Variable rms_norm(const Variable& x, const Variable& weight, double eps = 1e-6);

// ---- rotary position embedding (ops/rotary.cpp) ----
// x: (B, T, H, D), D even -> (B, T, H, D): the head vectors of position p = offset + t turned
// by the angles p * inv_freq[i] in the "rotate half" layout (element i pairs with i + D/2),
// Hugging Face's apply_rotary_pos_emb:
//   y = x * cos + rotate_half(x) * sin,   rotate_half(x) = concat(-x[D/2:], x[:D/2])
// cos, sin: (positions, D/2) tables in x's dtype (layers/rotary.h makes them from theta and
// the scaling); row p holds cos / sin of p * inv_freq. offset: the first position (the number
// of positions a KV cache already holds). Backward turns the gradient back; it saves nothing
// but the tables. Composed twin: the formula above with slice, concat, mul and add.
Variable rotary_embedding(const Variable& x, const Tensor& cos, const Tensor& sin, int64_t offset = 0);

// ---- swiglu (ops/swiglu.cpp) ----
// gate, up: the same shape -> silu(gate) * up, the gated unit of a SwiGLU feed-forward
// network: down(swiglu(gate(x), up(x))). Saves gate and up, not silu(gate). Composed twin:
// silu(gate) * up.
Variable swiglu(const Variable& gate, const Variable& up);

// ---- dropout (ops/dropout.cpp) ----
// Inverted dropout: each element is kept with probability 1 - p and scaled by 1 / (1 - p).
// Identity when !training or p == 0 (returns x itself and draws nothing); zero when p == 1.
// p outside [0, 1] throws. Otherwise the mask comes from one fresh stream of `gen`
// (seed, step, call): element i of x (row-major logical index, whatever x's strides) is kept
// when uniform_f64(key, i) >= p, so replaying the generator state replays the mask, f32 and
// f64 see the same mask, and backward regenerates it instead of storing it.
Variable dropout(const Variable& x, double p, bool training, Generator& gen = default_generator());

// ---- embedding (ops/embedding.cpp) ----
// weight: (num, dim), ids: any shape with values in [0, num) -> (*ids.shape, dim).
// Rows equal to padding_idx (if >= 0) read normally but receive no gradient. padding_idx is
// -1 or a row in [0, num); an id outside [0, num) throws, naming the id and the table size.
Variable embedding(const Variable& weight, const Indices& ids, int64_t padding_idx = -1);

// ---- cross-entropy (ops/cross_entropy.cpp): log-softmax and NLL fused ----
enum class Reduction { mean, sum, none };
struct CrossEntropyOptions {
  int64_t ignore_index = -100;   // targets equal to it contribute nothing (and are not counted)
  double label_smoothing = 0.0;  // in [0, 1], PyTorch's definition
  Reduction reduction = Reduction::mean;  // mean over non-ignored targets
};
// logits: (..., C), targets: (...) with values in [0, C) or ignore_index.
// Returns a scalar for mean/sum, shape (...) for none (0 at ignored targets).
//   loss = (1 - ls) * -log p_target + ls * mean over classes of -log p   (PyTorch 1.13)
// Mean divides by the number of non-ignored targets; when every target is ignored it returns
// 0 with a zero gradient (PyTorch returns NaN). Saves the logits and one log-sum-exp per row.
Variable cross_entropy(const Variable& logits, const Indices& targets, const CrossEntropyOptions& options = {});

// ---- linear_cross_entropy (ops/linear_cross_entropy.cpp): a head and its loss, in chunks ----
// cross_entropy(linear(h, weight), targets) for h (..., d), weight (V, d) (no bias) and targets
// h's shape without d, computed chunk_rows rows at a time: the (rows, V) logits never exist
// whole. When the op is recorded, forward also computes dh and dW while each chunk's logits are
// at hand (for a result gradient of 1, scaled in backward when it is not), so dW exists from
// the forward on and backward does no products. The same value and gradients up to rounding;
// with one chunk (chunk_rows >= rows) and a result gradient of 1, the same bits. Reductions
// mean and sum only.
struct LinearCrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::mean;
  int64_t chunk_rows = 256;
};
Variable linear_cross_entropy(const Variable& h, const Variable& weight, const Indices& targets,
                              const LinearCrossEntropyOptions& options = {});
// The rows per chunk that keep a chunk's logits within `budget_elements` values (at least 1),
// rounded down to a multiple of 96 from 96 on (two threads then take equal halves).
int64_t linear_cross_entropy_chunk(int64_t vocab, int64_t budget_elements = int64_t{16} << 20);

// ---- scaled dot-product attention (ops/attention.cpp) ----
// q: (B, H, Tq, Dk), k: (B, H, Tk, Dk), v: (B, H, Tk, Dv) -> (B, H, Tq, Dv)
//   weights = softmax(scale * q k^T + bias, over the keys the mask shows) ; output = dropout(weights) v
// mask: an AttentionMask (autograd/attention_mask.h) whose shape broadcasts to (B, H, Tq, Tk);
// the kernel reads its structure (causal offset, key lengths, a keep pattern) directly.
// bias: optional additive variable broadcastable to (B, H, Tq, Tk) (it receives a gradient).
// A query row whose keys are all masked gets all-zero weights, a zero output and zero, finite
// gradients (PyTorch gives NaN there). Everything is checked once, here.
struct AttentionOptions {
  double scale = 0.0;  // 0 means 1 / sqrt(Dk)
  double dropout = 0.0;
  bool training = false;
  Generator* generator = nullptr;  // default_generator() when null
};
// Dropout on the weights is drawn from one stream of the generator per call, keyed on the
// row-major index in (B, H, Tq, Tk), so it equals dropout() applied to `weights` from the same
// generator state. q, k, v may be strided views (e.g. a (B, T, H, D) tensor permuted to
// (B, H, T, D)): BLAS reads them in place.
struct AttentionResult {
  Variable output;
  // (B, H, Tq, Tk) after masking and softmax, before dropout; not differentiable. The backward
  // does not read it (it recomputes the weights from q, k, the mask and per-row statistics), so the caller
  // may keep, change or drop it.
  Tensor weights;
};
// Throws std::invalid_argument naming `op` and the three shapes unless q (B, H, Tq, Dk),
// k (B, H, Tk, Dk) and v (B, H, Tk, Dv) fit together: defined, 4-D, one dtype, the same B and H,
// equal depths Dk, equal lengths Tk. The op and the layers built on it share this one check.
void check_attention_operands(const Tensor& q, const Tensor& k, const Tensor& v, const std::string& op);

AttentionResult scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const AttentionMask& mask = {}, const Variable& bias = Variable(),
                                             const AttentionOptions& options = {});

}  // namespace ag
