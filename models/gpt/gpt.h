// GPT: a decoder-only language model in the shape of GPT-2 / nanoGPT, built from the layers of
// layers/. Each position predicts the next token from itself and the positions before it:
//
//   ids (B, T) --embed--> (B, T, d_model) + pos.weight[:T] --> dropout
//     --> blocks.0 .. blocks.{n_layers-1}: pre-norm TransformerBlock, causal self-attention and a
//         GELU MLP of 4 * d_model (the exact erf form by default, GPT-2's tanh approximation
//         with activation = gelu_tanh)
//     --> norm (LayerNorm, eps 1e-5) --> head: h embed.weight[:vocab]^T --> logits (B, T, vocab)
//
//   parameters: embed.weight (padded_vocab, d_model), pos.weight (block_size, d_model),
//               blocks.<i>.{attn.w_q, w_k, w_v, w_o, ff.linear1, ff.linear2, norm1, norm2}.*,
//               norm.weight, norm.bias
//
// Weight tying: the vocabulary head has no weight of its own; it multiplies by the token
// embedding's table, embed.weight. One parameter serves in two places, so its gradient is the
// sum of both uses, state_dict / named_parameters / checkpoints hold it once, an optimizer
// updates it once, and after load_state_dict or load_checkpoint the head still reads the
// embedding (there is nothing else it could read).
//
// Differences from nanoGPT, all in names or in where dropout sits: nanoGPT's fused c_attn is
// w_q / w_k / w_v here; `bias` switches the biases of the linear layers, while the LayerNorms
// always keep theirs; with dropout > 0 the MLP also drops out between its two layers (the
// PositionwiseFeedForward of layers/). With dropout 0 (or in eval mode) the function is
// nanoGPT's, which the PyTorch parity fixtures check (tests/parity, module "GPT").
//
// Vocabulary padding: with vocab_multiple > 1 the table has padded_vocab() rows, vocab rounded
// up to that multiple (llm.c pads GPT-2's 50257 to 50304), and the head reads its first vocab
// rows only: the logits have vocab columns, an extra row is never looked up, never sampled and
// never in a loss, and its gradient is zero. Only the table's size shows the padding.
//
// Initialisation (nanoGPT's and GPT-2's, drawn from default_generator(): seed it with ag::manual_seed for a
// reproducible model): every weight N(0, 0.02), the residual output projections (attn.w_o and
// ff.linear2) N(0, 0.02 / sqrt(2 n_layers)), biases 0, LayerNorms 1 and 0.
//
// Incremental decoding: forward(ids, cache) feeds only the new positions and keeps every
// layer's keys and values in a KvCache (layers/kv_cache.h), block i in layer i. It runs the
// same code as forward(ids): the blocks' own forward, given their layer of the cache and the
// causal mask offset by the cached positions. models/gpt/generate.h builds sampling and the
// sliding context window on top of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/core/quantize.h"
#include "attograd/layers/attention_mask.h"
#include "attograd/layers/dropout.h"
#include "attograd/layers/embedding.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/language_model.h"
#include "attograd/layers/layer_norm.h"
#include "attograd/layers/module.h"
#include "attograd/layers/positional.h"
#include "attograd/layers/sequential.h"
#include "attograd/layers/transformer.h"

namespace ag {

struct GPTOptions {
  int64_t vocab = 0;       // tokens in and classes out
  int64_t block_size = 0;  // the context: the longest sequence the positional table covers
  int64_t d_model = 0;
  int64_t n_head = 0;      // must divide d_model
  int64_t n_layers = 0;
  double dropout = 0.0;    // after the embeddings, on the attention weights and on both residual branches
  bool bias = true;        // in the attention projections and the MLP
  Activation activation = Activation::gelu;  // of the MLP; GPT-2 uses gelu_tanh
  int64_t vocab_multiple = 1;  // the table's rows are vocab rounded up to a multiple of this
};

// vocab rounded up to a multiple of vocab_multiple: the rows of embed.weight.
int64_t padded_vocab(const GPTOptions& options);

// Upper bounds of the options, for whatever reads them from a command line or a file.
struct GPTLimits {
  static constexpr int64_t vocab = int64_t{1} << 20;
  static constexpr int64_t block_size = 1 << 16;
  static constexpr int64_t d_model = int64_t{1} << 16;
  static constexpr int64_t n_head = int64_t{1} << 16;
  static constexpr int64_t n_layers = 1024;
  static constexpr int64_t vocab_multiple = 1 << 16;
};

// Throws std::invalid_argument naming the first bad option and its value.
void validate(const GPTOptions& options);

// GPT-2's published sizes, by name: "gpt2" (124M: 12 layers, 12 heads, d_model 768),
// "gpt2-medium" (350M: 24, 16, 1024), and for tests "gpt2-tiny" (2, 4, 64, context 128): each
// with GPT-2's context of 1024 (but tiny), its 50257 tokens, biases, the tanh GELU and dropout
// 0.1. std::invalid_argument listing the names otherwise.
GPTOptions gpt_preset(const std::string& name);
const std::vector<std::string>& gpt_preset_names();

class GPT : public LanguageModel {
 public:
  explicit GPT(const GPTOptions& options);

  // ids: (B, T) in [0, vocab), 1 <= T <= block_size -> logits (B, T, vocab). Position t uses
  // pos.weight[t] and attends to positions 0 .. t.
  Variable forward(const Indices& ids) override;
  Variable operator()(const Indices& ids) { return forward(ids); }

  // Incremental decoding: ids (B, T_new) are positions P .. P+T_new-1 of the window, where
  // P = cache.length(); their keys and values are appended to the cache, and the result is
  // rows P .. P+T_new-1 of forward(all ids so far), (B, T_new, vocab). Builds no graph (runs
  // under NoGradGuard). P + T_new must not exceed block_size: when the window is full, reset()
  // the cache and feed the tokens of the new window (generate.h does this). The cache must come
  // from make_cache (or match it: layers, heads, head sizes, batch, dtype); everything is
  // checked before anything is appended.
  Variable forward(const Indices& ids, KvCache& cache);

  // The mean next-token cross-entropy of ids (B, T) against targets (B, T) (ignore_index -100),
  // through linear_cross_entropy: the head and the loss a chunk of positions at a time, so that
  // the (B*T, vocab) logits never exist whole (chunks of linear_cross_entropy_chunk(vocab)
  // rows). cross_entropy(forward(ids), targets) up to rounding; the same bits when one chunk
  // covers every position, as for small vocabularies.
  Variable loss(const Indices& ids, const Indices& targets) override;

  // LanguageModel's view: "gpt", gpt_options_to_json, vocab, block_size, and generate.h's
  // generate().
  std::string family() const override { return "gpt"; }
  std::string options_json() const override;
  int64_t vocab_size() const override { return options_.vocab; }
  int64_t context_length() const override { return options_.block_size; }
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, const GenerateOptions& options) override;

  // The same model after the token lookup: x (B, T, d_model) token embeddings -> logits
  // (B, T, vocab). Lets a gradient check differentiate with respect to the embeddings; the
  // tied weight then serves the head only.
  Variable forward_embedded(const Variable& x);
  // The pieces of forward: hidden(x) is the final LayerNorm's output (B, T, d_model) for
  // token embeddings x, head(h) the tied projection h embed.weight^T, (..., d_model) -> (..., vocab).
  Variable hidden(const Variable& x);
  Variable head(const Variable& h);

  // An empty cache for `batch` sequences, sized for this model's block_size, in its dtype.
  KvCache make_cache(int64_t batch = 1) const;

  const GPTOptions& options() const { return options_; }
  Embedding& embed() { return embed_; }
  LearnedPositionalEmbedding& pos() { return pos_; }
  TransformerBlock& block(size_t i) { return blocks_[i]; }
  size_t num_blocks() const { return blocks_.size(); }
  LayerNorm& norm() { return norm_; }
  // Activation recompute (autograd/recompute.h): when on, a training forward (grad mode, no
  // cache) keeps only each block's input and runs the block again during backward; the
  // gradients are the same bits, the memory of the blocks' activations is one block's. Off by
  // default; not a model option (checkpoints do not record it).
  void set_recompute(bool on) override { recompute_ = on; }
  bool recompute() const { return recompute_; }
  // The vocabulary head's table (padded_vocab, d_model): the very Variable embed.weight holds;
  // the head reads its first vocab rows.
  const Variable& head_weight() const { return embed_.weight(); }
  std::string name() const override { return "GPT"; }

  // Inference only: quantized weights (int8 or q4_0, core/quantize.h) for every Linear of the
  // model (each block's attention projections and MLP, Linear::quantize_weights) and for the
  // tied head (its vocab rows of embed.weight); the token lookup keeps reading the float table.
  // Afterwards forward, the cached forward and generate() run as before on the quantized
  // products (at batch 1 a token reads ~1.1 bytes per weight in int8, ~0.56 in q4_0, instead of
  // 4), loss() under NoGradGuard scores the quantized head's logits, and any forward that would
  // need gradients throws std::logic_error naming the weight. Call it once the weights are
  // final (after loading; see Linear::quantize_weights); std::invalid_argument for an f64
  // model or a second call.
  void quantize(WeightFormat format);
  bool is_quantized() const { return !head_quantized_.empty(); }
  WeightFormat quantized_format() const { return head_quantized_.format; }

 private:
  // x: (B, T, d_model) embeddings of positions start .. start+T-1, before the positions are added.
  Variable positioned(const Variable& x, int64_t start);
  // The head's weight: embed.weight without the padding rows (vocab_multiple), (vocab, d_model).
  Variable head_table() const;
  // The body of every forward: positions, the blocks under `causal` (each with its layer of
  // the cache when there is one), the final norm -> (B, T, d_model).
  Variable through_blocks(const Variable& x, int64_t start, const AttentionMask& causal, KvCache* cache);
  void check_ids(const Indices& ids, const char* op) const;
  void init_weights();

  GPTOptions options_;
  Embedding& embed_;
  LearnedPositionalEmbedding& pos_;
  Dropout& dropout_;
  ModuleList<TransformerBlock>& blocks_;
  LayerNorm& norm_;
  bool recompute_ = false;
  QuantizedMatrix head_quantized_;  // the head's table once quantize() ran, else empty
};

}  // namespace ag
