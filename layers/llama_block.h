// LlamaBlock: the pre-norm decoder block of Llama, Qwen2/3, Mistral and SmolLM (Hugging Face's
// LlamaDecoderLayer), built from RMSNorm, GroupedQueryAttention and SwiGLU:
//   x: (B, T, d_model) -> (B, T, d_model)
//   h = x + self_attn(input_layernorm(x), mask, cache)
//   y = h + mlp(post_attention_layernorm(h))
//   children: input_layernorm, self_attn, post_attention_layernorm, mlp (Hugging Face's names,
//   so "layers.0.self_attn.q_proj.weight" is the key of model.layers.0.self_attn.q_proj.weight)
// There is no dropout on the residual branches (none of these models has any). Incremental
// decoding passes the attention's layer of a KvCache, as TransformerBlock does.
#pragma once

#include <cstdint>
#include <string>

#include "attograd/layers/grouped_attention.h"
#include "attograd/layers/module.h"
#include "attograd/layers/rms_norm.h"
#include "attograd/layers/swiglu.h"

namespace ag {

struct LlamaBlockOptions {
  GroupedQueryAttentionOptions attention;  // d_model is the block's
  int64_t d_hidden = 0;                    // the SwiGLU's intermediate size
  double norm_eps = 1e-6;                  // rms_norm_eps of both norms (and of q/k norms)
};

class LlamaBlock : public Module {
 public:
  explicit LlamaBlock(const LlamaBlockOptions& options);

  Variable forward(const Variable& x, const AttentionMask& mask = {}, const KvCacheLayer& cache = {});
  Variable operator()(const Variable& x, const AttentionMask& mask = {}, const KvCacheLayer& cache = {}) {
    return forward(x, mask, cache);
  }
  const LlamaBlockOptions& options() const { return options_; }
  RMSNorm& input_layernorm() { return input_layernorm_; }
  GroupedQueryAttention& self_attn() { return self_attn_; }
  RMSNorm& post_attention_layernorm() { return post_attention_layernorm_; }
  SwiGLU& mlp() { return mlp_; }
  std::string name() const override { return "LlamaBlock"; }

 private:
  LlamaBlockOptions options_;
  RMSNorm& input_layernorm_;
  GroupedQueryAttention& self_attn_;
  RMSNorm& post_attention_layernorm_;
  SwiGLU& mlp_;
};

}  // namespace ag
