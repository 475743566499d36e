// dropout: inverted dropout with a counter-based mask. Nothing is saved but the stream key:
// backward regenerates the mask element by element from (key, index).
#include "attograd/autograd/nn_ops.h"
#include "attograd/core/kernels.h"

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
