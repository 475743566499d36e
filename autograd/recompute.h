// recompute: activation checkpointing. A region of the forward (a transformer block) runs
// without keeping its graph; only its inputs are saved. When backward reaches the region, it
// runs the region's forward again, this time recording the graph, and backpropagates through
// that copy before the outer pass goes on (PyTorch's torch.utils.checkpoint, reentrant form).
//
//   h = recompute("block", [&](const std::vector<Variable>& in) { return block(in[0], mask); },
//                 {h}, block.parameters());
//
// Memory: during forward, the region's intermediate values are freed as soon as they are made;
// during backward, one region's graph exists at a time. Time: the region's forward runs twice.
//
// The gradients are the very bits of the plain run, under these conditions (tested for the GPT
// and the encoder-decoder, with dropout on):
//   * `fn` is deterministic given its inputs and the default generator's state: the state at
//     the forward call is saved and set again for the second run (then restored), so dropout
//     draws the same masks. A region that reads another generator must not be recomputed.
//   * `leaves` lists every leaf the region reads that may require grad (its parameters). They
//     take part in the second run as themselves, so their gradients accumulate in place exactly
//     as in the plain run; their grad-ready hooks (set_grad_ready_hook) fire once, when the
//     outer pass has finished with the region, not inside the region's own pass.
//   * An input that is an op's result is replaced by a leaf in the second run; the gradient the
//     outer pass has already gathered for it (when the input is also read after the region, or
//     by another region, as the encoder's output is read by every decoder layer) is handed to
//     that leaf first, so the additions happen in the same order as without recompute.
// The modules and whatever `fn` captures must outlive the graph. Without grad mode, or when
// nothing the region reads requires grad, recompute is fn(inputs).
#pragma once

#include <functional>
#include <vector>

#include "attograd/autograd/variable.h"

namespace ag {

using RecomputeFn = std::function<Variable(const std::vector<Variable>& inputs)>;

Variable recompute(const char* name, RecomputeFn fn, const std::vector<Variable>& inputs,
                   const std::vector<Variable>& leaves);

}  // namespace ag
