#include "attograd/models/seq2seq/seq2seq_memory.h"

#include <algorithm>
#include <utility>

namespace ag {

using namespace memory;

namespace {

// The head sizes of a seq2seq model's attentions, over all heads: d_k and d_v, d_model / n_head
// where unset.
std::pair<double, double> head_features(const Seq2SeqOptions& m) {
  const int64_t d_head = m.d_model / m.n_head;
  return {static_cast<double>(m.n_head * (m.d_k > 0 ? m.d_k : d_head)),
          static_cast<double>(m.n_head * (m.d_v > 0 ? m.d_v : d_head))};
}


}  // namespace

double parameter_count(const Seq2SeqOptions& m) {
  const double d = static_cast<double>(m.d_model), ff = static_cast<double>(m.d_ff);
  const auto [qk, v] = head_features(m);
  const double src = static_cast<double>(m.src_vocab);
  const double tgt = static_cast<double>(m.tgt_vocab == 0 ? m.src_vocab : m.tgt_vocab);
  const double tables = src * d + (m.share_embeddings ? 0 : tgt * d);
  const double positions = m.positional == PositionalKind::learned ? static_cast<double>(m.max_len) * d : 0;
  // Each stack: its layers, a LayerNorm on its input and one after it when asked.
  const double stack_norms = (m.input_norm ? 2 * d : 0) + (m.final_norm ? 2 * d : 0);
  const double block = block_parameters(d, ff, qk, v, m.attn_bias, true);
  const double encoder = static_cast<double>(m.n_encoder_layers) * block + stack_norms;
  // A decoder layer is a block plus cross-attention and a third LayerNorm.
  const double decoder_layer = block + attention_parameters(d, qk, v, m.attn_bias) + 2 * d;
  const double decoder = static_cast<double>(m.n_decoder_layers) * decoder_layer + stack_norms;
  const double head = m.tie_head ? 0 : tgt * d + tgt;
  return tables + positions + encoder + decoder + head;
}

MemoryEstimate estimate_training_memory(const Seq2SeqOptions& model, const Seq2SeqTaskOptions& task,
                                        const TrainerOptions& trainer, int64_t eval_sequences) {
  const double d = static_cast<double>(model.d_model), ff = static_cast<double>(model.d_ff);
  const double heads = static_cast<double>(model.n_head);
  const auto [qk, v] = head_features(model);
  const double vocab = static_cast<double>(model.tgt_vocab == 0 ? model.src_vocab : model.tgt_vocab);
  // Every sequence padded to the longest the model takes: sources and targets of max_len.
  const double t = static_cast<double>(model.max_len);
  const double block = block_activation_values(d, ff, heads, t, qk, v);
  const double encoder = blocks_kept(static_cast<double>(model.n_encoder_layers), block, d, trainer.recompute);
  const double cross_attention = 2 * qk + 2 * v + 2 * heads * t;
  const double decoder =
      blocks_kept(static_cast<double>(model.n_decoder_layers), block + cross_attention, d, trainer.recompute);
  const double per_row = t * (encoder + decoder + 4 * d + 3 * vocab);
  const double activations = 1.5 * static_cast<double>(task.batch_size) * per_row * kFloat;
  const int64_t rows = std::min<int64_t>(eval_sequences, 256);  // the held-out set's batches
  const double evaluation = static_cast<double>(rows) * t * (block * 2 + 2 * vocab) * kFloat;
  MemoryEstimate e = estimate(parameter_count(model), activations, evaluation, rows, trainer);
  // The job keeps its held-out sources and targets for the whole run: int64 sources of up to
  // max_len tokens, targets in and out of up to max_len + 1, the two lengths, and the vectors' slack.
  e.held_out = static_cast<double>(eval_sequences) * (4 * t + 4) * 8;  // (3 t + 4) measured a quarter short
  return e;
}

}  // namespace ag
