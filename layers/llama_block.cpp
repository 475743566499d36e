#include "attograd/layers/llama_block.h"

#include <stdexcept>

#include "attograd/autograd/ops.h"

namespace ag {

namespace {

GroupedQueryAttentionOptions attention_options(const LlamaBlockOptions& o) {
  GroupedQueryAttentionOptions a = o.attention;
  a.norm_eps = o.norm_eps;
  return a;
}

}  // namespace

LlamaBlock::LlamaBlock(const LlamaBlockOptions& options)
    : options_(options),
      input_layernorm_(register_module("input_layernorm",
                                       std::make_unique<RMSNorm>(options.attention.d_model, options.norm_eps))),
      self_attn_(register_module("self_attn", std::make_unique<GroupedQueryAttention>(attention_options(options)))),
      post_attention_layernorm_(register_module(
          "post_attention_layernorm", std::make_unique<RMSNorm>(options.attention.d_model, options.norm_eps))),
      mlp_(register_module("mlp", std::make_unique<SwiGLU>(options.attention.d_model, options.d_hidden))) {}

Variable LlamaBlock::forward(const Variable& x, const AttentionMask& mask, const KvCacheLayer& cache) {
  const Variable h = x + self_attn_(input_layernorm_(x), mask, cache);
  return h + mlp_(post_attention_layernorm_(h));
}

}  // namespace ag
