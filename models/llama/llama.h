// Llama: the decoder-only language model of Llama 2/3, Qwen2/3, Mistral and SmolLM, built from
// the layers of layers/ under Hugging Face's names (LlamaForCausalLM's state_dict keys), so that
// a Hugging Face directory loads by name (models/llama/llama_hf.h):
//
//   ids (B, T) --model.embed_tokens--> (B, T, d_model)
//     --> model.layers.0 .. model.layers.{n_layers-1}: LlamaBlock (pre-norm: RMSNorm, grouped-query
//         attention with rotary positions, RMSNorm, SwiGLU), causal
//     --> model.norm (RMSNorm) --> lm_head, or the token table itself when tied --> logits (B, T, vocab)
//
// No learned positions: the rotation of queries and keys carries them (layers/rotary.h), so the
// model runs at any length up to max_positions, and a cached forward starts its rotation where
// the cache ends. No dropout anywhere (none of these models has any), and no biases but Qwen2's
// q/k/v ones.
//
// Initialisation (Hugging Face's, from default_generator()): every Linear and the token table
// N(0, 0.02), biases 0, RMSNorms 1.
//
// Incremental decoding: forward(ids, cache) feeds the new positions only; layer i of the cache
// (make_cache: n_kv_head heads of head_dim) belongs to block i. The same blocks' forward as the
// training one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/layers/embedding.h"
#include "attograd/layers/kv_cache.h"
#include "attograd/layers/language_model.h"
#include "attograd/layers/linear.h"
#include "attograd/layers/llama_block.h"
#include "attograd/layers/module.h"
#include "attograd/layers/rms_norm.h"
#include "attograd/layers/rotary.h"
#include "attograd/layers/sequential.h"

namespace ag {

struct LlamaOptions {
  int64_t vocab = 0;          // vocab_size
  int64_t max_positions = 0;  // max_position_embeddings: the longest context
  int64_t d_model = 0;        // hidden_size
  int64_t n_layers = 0;       // num_hidden_layers
  int64_t n_head = 0;         // num_attention_heads
  int64_t n_kv_head = 0;      // num_key_value_heads; 0 means n_head
  int64_t head_dim = 0;       // 0 means d_model / n_head (Qwen3 sets its own)
  int64_t d_hidden = 0;       // intermediate_size
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  bool qk_norm = false;         // RMSNorm of each query and key head (Qwen3)
};

// n_kv_head and head_dim resolved.
LlamaOptions resolved(LlamaOptions options);
// Throws std::invalid_argument naming the first bad option and its value.
void validate(const LlamaOptions& options);

// Published shapes by name: "smollm2-135m" (30 layers, d_model 576, 9 heads over 3, MLP 1536,
// 49152 tokens, tied, theta 100000, context 8192), "qwen3-0.6b" (28, 1024, 16 over 8, head_dim
// 128, MLP 3072, 151936 tokens, tied, q/k norms, theta 1000000, context 40960), "llama3.2-1b"
// (16, 2048, 32 over 8, MLP 8192, 128256 tokens, tied, theta 500000 with llama3 scaling x32,
// context 131072), and "llama-tiny" (4, 128, 4 over 2, MLP 384, 256 byte tokens, context 256)
// for tests and a first run. std::invalid_argument listing the names otherwise.
LlamaOptions llama_preset(const std::string& name);
const std::vector<std::string>& llama_preset_names();

// The parameters a model of these options holds (what Llama::num_parameters() gives, without
// building it): 134,515,008 for smollm2-135m, 1,235,814,400 for llama3.2-1b.
int64_t llama_parameter_count(const LlamaOptions& options);

// Hugging Face's LlamaModel: the body without the head.
class LlamaBody : public Module {
 public:
  explicit LlamaBody(const LlamaOptions& options);
  Embedding& embed_tokens() { return embed_tokens_; }
  LlamaBlock& layer(size_t i) { return layers_[i]; }
  size_t num_layers() const { return layers_.size(); }
  RMSNorm& norm() { return norm_; }
  std::string name() const override { return "LlamaModel"; }

 private:
  friend class Llama;
  Embedding& embed_tokens_;
  ModuleList<LlamaBlock>& layers_;
  RMSNorm& norm_;
};

class Llama : public LanguageModel {
 public:
  explicit Llama(const LlamaOptions& options);

  // ids: (B, T) in [0, vocab), 1 <= T <= max_positions -> logits (B, T, vocab).
  Variable forward(const Indices& ids) override;
  Variable operator()(const Indices& ids) { return forward(ids); }
  // ids (B, T_new) at positions P .. P + T_new - 1, P = cache.length(): rows P .. of
  // forward(all ids so far), (B, T_new, vocab). Builds no graph. The cache must fit (make_cache);
  // everything is checked before anything is appended.
  Variable forward(const Indices& ids, KvCache& cache);
  // Mean next-token cross-entropy of ids against targets (B, T) (ignore_index -100), the head and
  // the loss a chunk of rows at a time (linear_cross_entropy).
  Variable loss(const Indices& ids, const Indices& targets) override;
  // LanguageModel's view: "llama", llama_options_to_json, vocab, max_positions, and
  // llama_generate.h's generate().
  std::string family() const override { return "llama"; }
  std::string options_json() const override;
  int64_t vocab_size() const override { return options_.vocab; }
  int64_t context_length() const override { return options_.max_positions; }
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, const GenerateOptions& options) override;
  // Token embeddings x (B, T, d_model) -> logits, for gradient checks with respect to x.
  Variable forward_embedded(const Variable& x);
  // The final RMSNorm's output (B, T, d_model) for token embeddings x, and the head.
  Variable hidden(const Variable& x);
  Variable head(const Variable& h);

  // An empty cache for `batch` sequences of up to `max_len` positions (0: max_positions).
  KvCache make_cache(int64_t batch = 1, int64_t max_len = 0) const;

  const LlamaOptions& options() const { return options_; }
  LlamaBody& model() { return model_; }
  // The head's weight (vocab, d_model): lm_head.weight, or model.embed_tokens.weight when tied.
  const Variable& head_weight() const;
  // Inference only, as GPT::quantize: every Linear (each block's projections, lm_head when
  // untied) and the tied head's table in `format` (core/quantize.h); the token lookup keeps the
  // float table. Afterwards forward, the cached forward, generate() and loss() under
  // NoGradGuard run on the quantized products; a forward that needs gradients throws
  // std::logic_error naming the weight. std::invalid_argument for an f64 model or a second call.
  void quantize(WeightFormat format);
  bool is_quantized() const { return quantized_; }
  // Activation recompute for training (autograd/recompute.h), as GPT::set_recompute.
  void set_recompute(bool on) override { recompute_ = on; }
  bool recompute() const { return recompute_; }
  std::string name() const override { return "Llama"; }

 private:
  Variable through_blocks(const Variable& x, const AttentionMask& causal, KvCache* cache);
  void check_ids(const Indices& ids, const char* op) const;
  void init_weights();

  LlamaOptions options_;
  LlamaBody& model_;
  Linear* lm_head_ = nullptr;
  bool recompute_ = false;
  bool quantized_ = false;
  QuantizedMatrix tied_head_;  // the token table quantized, when the head is tied and quantize() ran
};

}  // namespace ag
