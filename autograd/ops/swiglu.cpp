// swiglu: the gated unit of a SwiGLU feed-forward network, silu(gate) * up, fused. With
// sig = sigmoid(gate):
//
//   forward                               backward
//   y = gate * sig * up                   dup   = g * gate * sig
//                                         dgate = g * up * sig * (1 + gate * (1 - sig))
//
// The composed form, silu(gate) * up, keeps gate for silu's backward and silu(gate) for the
// product's; the fused op keeps gate and up (which the product needs anyway) and recomputes
// sig, so a (B, T, d_ff) tensor less stays alive per layer.
#include <cmath>
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/parallel.h"
#include "attograd/core/vec_math.h"

namespace ag::kernels {

namespace {

void check_swiglu(const Tensor& gate, const Tensor& up, const char* op) {
  if (!gate.defined() || !up.defined() || gate.shape() != up.shape() || gate.dtype() != up.dtype()) {
    throw std::invalid_argument(std::string(op) + ": gate and up must have one shape and dtype, got gate=" +
                                (gate.defined() ? gate.shape().str() + " " + dtype_name(gate.dtype()) : "undefined") +
                                " up=" + (up.defined() ? up.shape().str() + " " + dtype_name(up.dtype()) : "undefined"));
  }
}

// sigmoid(v) as 1 / (1 + exp(-v)): vec_exp keeps the float loop vectorised; where exp(-v)
// overflows the result is 0, as it should be.
template <typename T>
T sigmoid_of(T v) {
  return 1 / (1 + vec_exp(-v));
}

template <typename F>
void for_elements(int64_t n, F f) {
  parallel_for(n, parallel_chunks(n, 6.0 * static_cast<double>(n)), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i);
  });
}

}  // namespace

Tensor swiglu_forward(const Tensor& gate_in, const Tensor& up_in) {
  check_swiglu(gate_in, up_in, "swiglu");
  const Tensor gate = gate_in.contiguous(), up = up_in.contiguous();
  Tensor y(gate.shape(), gate.dtype());
  dispatch(gate.dtype(), [&]<typename T>(T) {
    const T* pg = gate.data<T>();
    const T* pu = up.data<T>();
    T* py = y.data<T>();
    for_elements(y.numel(), [&](int64_t i) { py[i] = pg[i] * sigmoid_of(pg[i]) * pu[i]; });
  });
  return y;
}

SwigluGrads swiglu_backward(const Tensor& g_in, const Tensor& gate_in, const Tensor& up_in, bool want_gate,
                            bool want_up) {
  check_swiglu(gate_in, up_in, "swiglu_backward");
  if (!g_in.defined() || g_in.shape() != gate_in.shape() || g_in.dtype() != gate_in.dtype()) {
    throw std::invalid_argument("swiglu_backward: gradient " +
                                (g_in.defined() ? g_in.shape().str() : std::string("undefined")) +
                                " does not match gate " + gate_in.shape().str());
  }
  const Tensor g = g_in.contiguous(), gate = gate_in.contiguous(), up = up_in.contiguous();
  SwigluGrads out;
  if (want_gate) out.dgate = Tensor(gate.shape(), gate.dtype());
  if (want_up) out.dup = Tensor(gate.shape(), gate.dtype());
  dispatch(gate.dtype(), [&]<typename T>(T) {
    const T* pg = g.data<T>();
    const T* pa = gate.data<T>();
    const T* pu = up.data<T>();
    T* pda = want_gate ? out.dgate.data<T>() : nullptr;
    T* pdu = want_up ? out.dup.data<T>() : nullptr;
    for_elements(gate.numel(), [&](int64_t i) {
      const T a = pa[i], sig = sigmoid_of(a);
      if (pdu) pdu[i] = pg[i] * (a * sig);
      if (pda) pda[i] = pg[i] * pu[i] * (sig * (1 + a * (1 - sig)));
    });
  });
  return out;
}

}  // namespace ag::kernels

namespace ag {

Variable swiglu(const Variable& gate, const Variable& up) {
  const Tensor gate_val = gate.value(), up_val = up.value();
  Tensor y = kernels::swiglu_forward(gate_val, up_val);
  const bool any = any_requires_grad({gate, up});
  const Tensor gate_saved = any ? gate_val : Tensor();
  const Tensor up_saved = any ? up_val : Tensor();
  return make_result("swiglu", std::move(y), {gate, up}, [gate_saved, up_saved](const Tensor& g, GradSink& grads) {
    kernels::SwigluGrads d = kernels::swiglu_backward(g, gate_saved, up_saved, grads.wants(0), grads.wants(1));
    if (grads.wants(0)) grads.add(0, d.dgate);
    if (grads.wants(1)) grads.add(1, d.dup);
  });
}

}  // namespace ag
