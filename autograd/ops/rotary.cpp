// rotary_embedding: rotary position embedding (RoPE) in the "rotate half" layout of Hugging
// Face's Llama, Qwen and Mistral. A head vector's two halves pair up: element i and element
// i + D/2 (i < D/2) are the coordinates of a point in a plane, turned by the angle
// position * inv_freq[i]. The tables hold cos and sin of those angles, one row per position:
//
//   forward (c = cos[p], s = sin[p], p = offset + t)       backward: the inverse rotation
//   y[i]       = x[i] c[i] - x[i + D/2] s[i]                dx[i]       = g[i] c[i] + g[i + D/2] s[i]
//   y[i + D/2] = x[i + D/2] c[i] + x[i] s[i]                dx[i + D/2] = g[i + D/2] c[i] - g[i] s[i]
//
// A rotation keeps lengths, and its transpose is the rotation back, so backward is the forward
// kernel with sin negated and saves nothing but the (shared) tables: no activation is kept.
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/parallel.h"

namespace ag::kernels {

void check_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t offset, const char* op) {
  const auto shape_of = [](const Tensor& t) { return t.defined() ? t.shape().str() : std::string("undefined"); };
  if (!x.defined() || x.dim() != 4 || x.shape()[3] % 2 != 0 || x.shape()[3] == 0) {
    throw std::invalid_argument(std::string(op) + ": x must be (B, T, H, D) with an even head size D, got " +
                                shape_of(x));
  }
  const int64_t T = x.shape()[1], half = x.shape()[3] / 2;
  const bool tables_ok = cos.defined() && sin.defined() && cos.dim() == 2 && cos.shape() == sin.shape() &&
                         cos.shape()[1] == half && cos.dtype() == x.dtype() && sin.dtype() == x.dtype();
  if (!tables_ok) {
    throw std::invalid_argument(std::string(op) + ": cos " + shape_of(cos) + " and sin " + shape_of(sin) +
                                " must both be (positions, D/2 = " + std::to_string(half) + ") in " +
                                dtype_name(x.dtype()) + " for x " + x.shape().str());
  }
  if (offset < 0 || offset + T > cos.shape()[0]) {
    throw std::invalid_argument(std::string(op) + ": positions " + std::to_string(offset) + " .. " +
                                std::to_string(offset + T - 1) + " of x " + x.shape().str() +
                                " are outside the tables' " + std::to_string(cos.shape()[0]) + " positions");
  }
}

Tensor rotary(const Tensor& x_in, const Tensor& cos_in, const Tensor& sin_in, int64_t offset, bool inverse) {
  const Tensor x = x_in.contiguous(), cos = cos_in.contiguous(), sin = sin_in.contiguous();
  const int64_t B = x.shape()[0], T = x.shape()[1], H = x.shape()[2], D = x.shape()[3], half = D / 2;
  Tensor y(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T_>(T_) {
    const T_* px = x.data<T_>();
    const T_* pc = cos.data<T_>();
    const T_* ps = sin.data<T_>();
    T_* py = y.data<T_>();
    const T_ sign = inverse ? T_(-1) : T_(1);
    parallel_for(B * T, parallel_chunks(B * T, 4.0 * static_cast<double>(x.numel())), [&](int64_t first, int64_t last) {
      for (int64_t bt = first; bt < last; ++bt) {
        const int64_t p = offset + bt % T;
        const T_* c = pc + p * half;
        const T_* s = ps + p * half;
        for (int64_t h = 0; h < H; ++h) {
          const T_* xr = px + (bt * H + h) * D;
          T_* yr = py + (bt * H + h) * D;
          for (int64_t i = 0; i < half; ++i) {
            const T_ si = sign * s[i];
            yr[i] = xr[i] * c[i] - xr[i + half] * si;
            yr[i + half] = xr[i + half] * c[i] + xr[i] * si;
          }
        }
      }
    });
  });
  return y;
}

}  // namespace ag::kernels

namespace ag {

Variable rotary_embedding(const Variable& x, const Tensor& cos, const Tensor& sin, int64_t offset) {
  kernels::check_rotary(x.value(), cos, sin, offset, "rotary_embedding");
  Tensor y = kernels::rotary(x.value(), cos, sin, offset, false);
  return make_result("rotary_embedding", std::move(y), {x}, [cos, sin, offset](const Tensor& g, GradSink& grads) {
    grads.add(0, kernels::rotary(g, cos, sin, offset, true));
  });
}

}  // namespace ag
