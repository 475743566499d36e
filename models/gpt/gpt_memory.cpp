#include "attograd/models/gpt/gpt_memory.h"

namespace ag {

using namespace memory;

double parameter_count(const GPTOptions& m) {
  const double d = static_cast<double>(m.d_model);
  // Token and position tables, the blocks (feed-forward 4 d wide), the final LayerNorm; the head
  // is the token table itself.
  return static_cast<double>(m.vocab + m.block_size) * d +
         static_cast<double>(m.n_layers) * block_parameters(d, 4 * d, d, d, m.bias, m.bias) + 2 * d;
}

MemoryEstimate estimate_training_memory(const GPTOptions& model, int64_t batch, const TrainerOptions& trainer) {
  const double d = static_cast<double>(model.d_model), t = static_cast<double>(model.block_size);
  const double heads = static_cast<double>(model.n_head), vocab = static_cast<double>(model.vocab);
  const double per_token = blocks_kept(static_cast<double>(model.n_layers), block_activation_values(d, 4 * d, heads, t, d, d),
                                       d, trainer.recompute) +
                           2 * d + 3 * vocab;
  const double activations = 1.5 * static_cast<double>(batch) * t * per_token * kFloat;
  // Evaluation: the batch's rows, one block's temporaries at a time, then the logits.
  const double evaluation =
      static_cast<double>(batch) * t * (block_activation_values(d, 4 * d, heads, t, d, d) + 2 * vocab) * kFloat;
  return estimate(parameter_count(model), activations, evaluation, batch, trainer);
}

}  // namespace ag
