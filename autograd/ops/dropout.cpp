// dropout: inverted dropout with a counter-based mask. Nothing is saved but the stream key:
// backward regenerates the mask element by element from (key, index).
//
// The kernels:
// Dropout masks drawn from a counter-based stream: element i of a tensor is kept or dropped by
// a pure function of (key, i), so the mask does not depend on strides, threads or call order,
// and backward regenerates it instead of storing it.
#include <cmath>
#include <stdexcept>
#include <string>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"
#include "attograd/core/strided.h"

namespace ag::kernels {

void check_dropout_probability(double p, const char* op) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw std::invalid_argument(std::string(op) + ": dropout probability p must be in [0, 1], got p=" +
                                std::to_string(p));
  }
}

Tensor apply_dropout(const Tensor& x, const DropoutMask& mask) {
  if (!x.defined()) throw std::invalid_argument("dropout: the input tensor is undefined");
  check_dropout_probability(mask.p, "dropout");
  Tensor out(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>(T) {
    const T scale = static_cast<T>(mask.scale());
    const T* px = x.data<T>();
    T* po = out.data<T>();
    // `out` is contiguous, so its offset is the logical row-major index the mask is keyed on.
    for_each_row<2>(x.shape(), {&out.strides(), &x.strides()}, [&](auto off, int64_t n, auto in) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = off[0] + i * in[0];
        po[at] = mask.keeps(static_cast<uint64_t>(at)) ? px[off[1] + i * in[1]] * scale : T(0);
      }
    });
  });
  return out;
}

}  // namespace ag::kernels

namespace ag {

Variable dropout(const Variable& x, double p, bool training, Generator& gen) {
  kernels::check_dropout_probability(p, "dropout");
  if (!training || p == 0.0) return x;
  // Every training call with p > 0 claims one stream (p == 1 too, though it draws nothing),
  // so the streams of later random ops do not depend on the value of p.
  const kernels::DropoutMask mask{p, gen.next_stream()};
  return make_result("dropout", kernels::apply_dropout(x.value(), mask), {x},
                     [mask](const Tensor& g, GradSink& grads) { grads.add(0, kernels::apply_dropout(g, mask)); });
}

}  // namespace ag
