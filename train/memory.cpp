#include "attograd/train/memory.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "attograd/core/storage.h"

namespace ag {

namespace {

constexpr double kFloat = 4;  // bytes of an f32 value: the Trainer trains in f32
constexpr double kMinEvalBudget = 256.0 * (1 << 20);

// Bytes of the optimizer's state for `params` bytes of parameters.
double optimizer_bytes(const TrainerOptions& trainer, double params) {
  switch (trainer.optimizer) {
    case OptimizerKind::sgd: return trainer.momentum > 0 ? params : 0;
    case OptimizerKind::adam:
    case OptimizerKind::adamw: return 2 * params;
  }
  return 2 * params;
}

// Parameters of one attention of width d whose heads give qk query (and key) features and v
// value features in all (n_head * d_k and n_head * d_v): the four projections, with their
// biases when `bias`.
double attention_parameters(double d, double qk, double v, bool bias) {
  const double b = bias ? 1 : 0;
  return 2 * (d * qk + b * qk) + (d * v + b * v) + (v * d + b * d);
}

// Parameters of one pre- or post-norm block of width d: the attention, the feed-forward (with
// its biases when `ff_bias`), two LayerNorms.
double block_parameters(double d, double ff, double qk, double v, bool attn_bias, bool ff_bias) {
  const double b = ff_bias ? 1 : 0;
  return attention_parameters(d, qk, v, attn_bias) + 2 * d * ff + b * (ff + d) + 4 * d;
}

// Activations a training step keeps per token of one block (generously; see memory.h), with
// `keys` keys per query and qk / v features of queries (and keys) / values over all heads.
double block_activation_values(double d, double ff, double heads, double keys, double qk, double v) {
  return 6 * d + 2 * qk + 2 * v + 2 * ff + 2 * heads * keys;
}

// What a stack of `layers` blocks keeps per token: every block's activations, or with recompute
// (autograd/recompute.h) each block's input (`input` values) and one block's activations, the
// one being run again in backward.
double blocks_kept(double layers, double per_block, double input, bool recompute) {
  return recompute ? layers * input + per_block : layers * per_block;
}

MemoryEstimate estimate(double parameters, double activations, double evaluation, int64_t eval_rows,
                        const TrainerOptions& trainer) {
  MemoryEstimate e;
  e.parameters = parameters * kFloat;
  e.gradients = e.parameters;
  e.optimizer_state = optimizer_bytes(trainer, e.parameters);
  e.activations = activations / static_cast<double>(trainer.grad_accum);  // one micro-batch's
  e.evaluation = evaluation;
  e.eval_rows = eval_rows;
  return e;
}

// The head sizes of a seq2seq model's attentions, over all heads: d_k and d_v, d_model / n_head
// where unset.
std::pair<double, double> head_features(const Seq2SeqOptions& m) {
  const int64_t d_head = m.d_model / m.n_head;
  return {static_cast<double>(m.n_head * (m.d_k > 0 ? m.d_k : d_head)),
          static_cast<double>(m.n_head * (m.d_v > 0 ? m.d_v : d_head))};
}

}  // namespace

double parameter_count(const SequenceModelOptions& m) {
  const double d = static_cast<double>(m.d_model), ff = static_cast<double>(m.d_ff);
  const double positions = m.positional == PositionalKind::learned ? static_cast<double>(m.max_len) * d : 0;
  const double vocab = static_cast<double>(m.vocab);
  const double final_norm = m.norm_first ? 2 * d : 0;
  return vocab * d + positions + static_cast<double>(m.n_layers) * block_parameters(d, ff, d, d, true, true) + final_norm +
         vocab * d + vocab;
}

double parameter_count(const GPTOptions& m) {
  const double d = static_cast<double>(m.d_model);
  // Token and position tables, the blocks (feed-forward 4 d wide), the final LayerNorm; the head
  // is the token table itself.
  return static_cast<double>(m.vocab + m.block_size) * d +
         static_cast<double>(m.n_layers) * block_parameters(d, 4 * d, d, d, m.bias, m.bias) + 2 * d;
}

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

std::string MemoryEstimate::breakdown() const {
  std::ostringstream os;
  os << "parameters " << format_bytes(parameters) << ", gradients " << format_bytes(gradients) << ", optimizer state "
     << format_bytes(optimizer_state) << ", activations " << format_bytes(activations) << ", evaluation "
     << format_bytes(evaluation) << " (" << eval_rows << (eval_rows == 1 ? " row" : " rows") << " at once)";
  if (held_out > 0) os << ", held-out set " << format_bytes(held_out);
  return os.str();
}

double eval_bytes_per_row(const SequenceModelOptions& m, int64_t seq_len) {
  const double t = static_cast<double>(seq_len), d = static_cast<double>(m.d_model);
  // One block at a time: scores and weights (heads x T per token), the feed-forward hidden
  // layer, a few d_model-wide temporaries; then the logits and their softmax.
  const double per_token = 2 * static_cast<double>(m.n_head) * t + static_cast<double>(m.d_ff) + 8 * d +
                           2 * static_cast<double>(m.vocab);
  return t * per_token * kFloat;
}

double training_activation_bytes(const SequenceModelOptions& m, const SequenceTaskOptions& task, bool recompute) {
  const double t = static_cast<double>(task.seq_len), d = static_cast<double>(m.d_model);
  const double tokens = static_cast<double>(task.batch_size) * t;
  const double per_block = 10 * d + 2 * static_cast<double>(m.d_ff) + 2 * static_cast<double>(m.n_head) * t;
  const double per_token = blocks_kept(static_cast<double>(m.n_layers), per_block, d, recompute) + 2 * d +
                           3 * static_cast<double>(m.vocab);
  // Backward holds the gradient of the activations next to them: about half as much again.
  return 1.5 * tokens * per_token * kFloat;
}

int64_t eval_rows_for(const SequenceModelOptions& model, const SequenceTaskOptions& task, int64_t max_rows) {
  const double budget = std::max(training_activation_bytes(model, task, false), kMinEvalBudget);
  const double per_row = eval_bytes_per_row(model, task.seq_len);
  const double fit = per_row > 0 ? budget / per_row : static_cast<double>(max_rows);
  return std::clamp<int64_t>(fit >= static_cast<double>(max_rows) ? max_rows : static_cast<int64_t>(fit), 1,
                             std::max<int64_t>(max_rows, 1));
}

MemoryEstimate estimate_training_memory(const SequenceModelOptions& model, const SequenceTaskOptions& task,
                                        const TrainerOptions& trainer, int64_t eval_sequences) {
  const int64_t rows = eval_rows_for(model, task, std::min<int64_t>(eval_sequences, 256));
  return estimate(parameter_count(model), training_activation_bytes(model, task, trainer.recompute),
                  static_cast<double>(rows) * eval_bytes_per_row(model, task.seq_len), rows, trainer);
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

double available_memory_bytes() {
  double available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      available = kib * 1024;
      break;
    }
  }
  if (available <= 0) {
    available = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  }
  // A container's limit is lower than the machine's memory.
  std::ifstream limit_file("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (limit_file >> limit && limit != "max") {
    try {
      available = std::min(available, std::stod(limit));
    } catch (const std::exception&) {
      // an unreadable limit leaves the machine's figure
    }
  }
  return available;
}

void check_memory_fits(const MemoryEstimate& need, double available, const std::string& hint) {
  if (need.total() <= available) return;
  throw std::invalid_argument("the run needs about " + format_bytes(need.total()) + " of memory (" + need.breakdown() +
                              ") but this machine has " + format_bytes(available) + " available; " + hint);
}

}  // namespace ag
