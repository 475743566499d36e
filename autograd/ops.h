// Differentiable ops. Each is a free function taking and returning Variables; its backward
// lives next to its forward in autograd/ops/<family>.cpp. Shapes follow PyTorch: binary ops
// broadcast (through broadcast_to, whose backward sums back to the input's shape), axes may be
// negative, and bad input throws std::invalid_argument naming the op and every shape.
#pragma once

#include <cstdint>
#include <vector>

#include "attograd/autograd/variable.h"

namespace ag {

// ---- elementwise (ops/elementwise.cpp) ----
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable add(const Variable& a, double b);
Variable mul(const Variable& a, double b);
Variable neg(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);
Variable sqrt(const Variable& x);
Variable pow(const Variable& x, double exponent);
Variable pow(const Variable& base, const Variable& exponent);  // base > 0 where exponent needs a gradient
Variable tanh(const Variable& x);
Variable sigmoid(const Variable& x);
Variable relu(const Variable& x);
Variable gelu(const Variable& x);  // exact (erf) form, PyTorch's default
// GPT-2's tanh approximation, PyTorch's F.gelu(x, approximate='tanh') (HF's "gelu_new").
Variable gelu_tanh(const Variable& x);
// x * sigmoid(x) (Llama's "silu"; swiglu in nn_ops.h fuses it with the gate's product).
Variable silu(const Variable& x);

inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
inline Variable operator-(const Variable& x) { return neg(x); }
inline Variable operator+(const Variable& a, double b) { return add(a, b); }
inline Variable operator+(double a, const Variable& b) { return add(b, a); }
inline Variable operator-(const Variable& a, double b) { return add(a, -b); }
inline Variable operator-(double a, const Variable& b) { return add(neg(b), a); }
inline Variable operator*(const Variable& a, double b) { return mul(a, b); }
inline Variable operator*(double a, const Variable& b) { return mul(b, a); }
inline Variable operator/(const Variable& a, double b) { return mul(a, 1.0 / b); }

// ---- masking (ops/masking.cpp) ----
// `mask` / `cond` are plain tensors (nonzero = true) that broadcast against the data; they get
// no gradient.
// x where mask is zero, `value` where it is nonzero. mask must broadcast to x's shape.
Variable masked_fill(const Variable& x, const Tensor& mask, double value);
// a where cond is nonzero, b elsewhere; a, b and cond broadcast together.
Variable where(const Tensor& cond, const Variable& a, const Variable& b);

// ---- reductions (ops/reduce.cpp) ----
// An empty `axes` reduces over every axis.
Variable sum(const Variable& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Variable mean(const Variable& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
// Ties share the gradient equally (like PyTorch's amax).
Variable max(const Variable& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);

// ---- shape (ops/shape.cpp): views where the data allows, copies otherwise ----
Variable reshape(const Variable& x, const Shape& shape);
Variable transpose(const Variable& x, int64_t a, int64_t b);
Variable permute(const Variable& x, const std::vector<int64_t>& order);
Variable slice(const Variable& x, int64_t axis, int64_t start, int64_t end, int64_t step = 1);
Variable narrow(const Variable& x, int64_t axis, int64_t start, int64_t length);
Variable unsqueeze(const Variable& x, int64_t axis);
Variable squeeze(const Variable& x, int64_t axis);
Variable concat(const std::vector<Variable>& parts, int64_t axis);
// Broadcast to `shape` (no copy); backward sums over the stretched dimensions.
Variable broadcast_to(const Variable& x, const Shape& shape);
inline Variable expand(const Variable& x, const Shape& shape) { return broadcast_to(x, shape); }
Variable contiguous(const Variable& x);

// ---- matrix products (ops/matmul.cpp) ----
// a: (..., M, K), b: (..., K, N) -> (..., M, N); batch dimensions broadcast.
Variable matmul(const Variable& a, const Variable& b);

// ---- softmax (ops/softmax.cpp) ----
Variable softmax(const Variable& x, int64_t axis = -1);
Variable log_softmax(const Variable& x, int64_t axis = -1);

}  // namespace ag
