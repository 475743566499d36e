#include "attograd/models/gpt/gpt.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"
#include "attograd/autograd/recompute.h"
#include "attograd/core/parallel.h"
#include "attograd/core/skip_init.h"
#include "attograd/layers/attention_mask.h"
#include "attograd/layers/init.h"

namespace ag {

namespace {

const GPTOptions& checked(const GPTOptions& options) {
  validate(options);
  return options;
}

TransformerBlockOptions block_options(const GPTOptions& o) {
  TransformerBlockOptions b;
  b.d_model = o.d_model;
  b.n_head = o.n_head;
  b.d_ff = 4 * o.d_model;
  b.dropout = o.dropout;
  b.attn_dropout = o.dropout;
  b.activation = o.activation;
  b.norm_first = true;
  b.attn_bias = o.bias;
  b.ff_bias = o.bias;
  return b;
}

}  // namespace

void validate(const GPTOptions& o) {
  const auto in_range = [](const char* key, int64_t v, int64_t low, int64_t high) {
    if (v < low || v > high) {
      throw std::invalid_argument(std::string("GPT: ") + key + " must lie in [" + std::to_string(low) + ", " +
                                  std::to_string(high) + "], got " + std::to_string(v));
    }
  };
  using L = GPTLimits;
  in_range("vocab", o.vocab, 1, L::vocab);
  in_range("block_size", o.block_size, 1, L::block_size);
  in_range("d_model", o.d_model, 1, L::d_model);
  in_range("n_head", o.n_head, 1, L::n_head);
  in_range("n_layers", o.n_layers, 1, L::n_layers);
  in_range("vocab_multiple", o.vocab_multiple, 1, L::vocab_multiple);
  if (o.d_model % o.n_head != 0) {
    throw std::invalid_argument("GPT: n_head " + std::to_string(o.n_head) + " does not divide d_model " +
                                std::to_string(o.d_model));
  }
  if (!(o.dropout >= 0.0 && o.dropout < 1.0)) {
    std::ostringstream os;
    os << "GPT: dropout must lie in [0, 1), got " << o.dropout;
    throw std::invalid_argument(os.str());
  }
}

GPTOptions gpt_preset(const std::string& name) {
  // GPT-2's tokenizer has 50257 tokens; its models all use a context of 1024, dropout 0.1 after
  // the embeddings, on the attention weights and on the residual branches.
  GPTOptions o{.vocab = 50257, .block_size = 1024, .d_model = 768, .n_head = 12, .n_layers = 12, .dropout = 0.1,
               .bias = true, .activation = Activation::gelu_tanh};
  if (name == "gpt2") return o;
  if (name == "gpt2-medium") {
    o.d_model = 1024, o.n_head = 16, o.n_layers = 24;
    return o;
  }
  if (name == "gpt2-tiny") {
    o.d_model = 64, o.n_head = 4, o.n_layers = 2, o.block_size = 128;
    return o;
  }
  std::string names;
  for (const std::string& n : gpt_preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw std::invalid_argument("GPT: no preset named '" + name + "' (the presets are " + names + ")");
}

const std::vector<std::string>& gpt_preset_names() {
  static const std::vector<std::string> names{"gpt2", "gpt2-medium", "gpt2-tiny"};
  return names;
}

int64_t padded_vocab(const GPTOptions& o) { return (o.vocab + o.vocab_multiple - 1) / o.vocab_multiple * o.vocab_multiple; }

GPT::GPT(const GPTOptions& options)
    : options_(checked(options)),
      embed_(register_module("embed", std::make_unique<Embedding>(padded_vocab(options), options.d_model))),
      pos_(register_module("pos", std::make_unique<LearnedPositionalEmbedding>(options.block_size, options.d_model))),
      dropout_(register_module("dropout", std::make_unique<Dropout>(options.dropout))),
      blocks_(register_module("blocks", std::make_unique<ModuleList<TransformerBlock>>())),
      norm_(register_module("norm", std::make_unique<LayerNorm>(options.d_model))) {
  for (int64_t i = 0; i < options.n_layers; ++i) blocks_.push_back(std::make_unique<TransformerBlock>(block_options(options)));
  init_weights();
}

void GPT::init_weights() {
  // nanoGPT: N(0, 0.02) everywhere, and the projections that write into the residual stream
  // scaled by 1/sqrt(2 n_layers) so that its variance does not grow with depth. The layers'
  // own PyTorch inits (N(0, 1) embeddings) would give the tied head logits of size
  // sqrt(d_model) at the start.
  constexpr double kStd = 0.02;
  const double residual_std = kStd / std::sqrt(2.0 * static_cast<double>(options_.n_layers));
  init_normal(embed_.weight(), kStd);
  init_normal(pos_.weight(), kStd);
  for (TransformerBlock* b : blocks_) {
    init_linear(b->attn().w_q(), kStd);
    init_linear(b->attn().w_k(), kStd);
    init_linear(b->attn().w_v(), kStd);
    init_linear(b->attn().w_o(), residual_std);
    init_linear(b->ff_as<PositionwiseFeedForward>().linear1(), kStd);
    init_linear(b->ff_as<PositionwiseFeedForward>().linear2(), residual_std);
  }
}

void GPT::check_ids(const Indices& ids, const char* op) const {
  if (ids.shape.rank() != 2 || ids.shape[0] < 1 || ids.shape[1] < 1 || ids.shape[1] > options_.block_size) {
    throw std::invalid_argument(std::string(op) + ": ids of shape " + ids.shape.str() +
                                " must be (B, T) with 1 <= T <= block_size=" + std::to_string(options_.block_size) +
                                " (generate() slides a longer context)");
  }
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (ids[i] < 0 || ids[i] >= options_.vocab) {
      throw std::invalid_argument(std::string(op) + ": token id " + std::to_string(ids[i]) + " at (" +
                                  std::to_string(i / ids.shape[1]) + ", " + std::to_string(i % ids.shape[1]) +
                                  ") of ids " + ids.shape.str() + " is outside [0, vocab=" +
                                  std::to_string(options_.vocab) + ")");
    }
  }
}

Variable GPT::positioned(const Variable& x, int64_t start) {
  require_dtype(x, pos_.weight().dtype(), "token embeddings");
  return dropout_(x + narrow(pos_.weight(), 0, start, x.shape()[1]));  // (T, d_model) broadcasts over B
}

Variable GPT::hidden(const Variable& x) {
  if (x.dim() != 3 || x.shape()[2] != options_.d_model || x.shape()[1] < 1 || x.shape()[1] > options_.block_size) {
    throw std::invalid_argument("GPT: token embeddings of shape " + x.shape().str() + " must be (B, T, d_model=" +
                                std::to_string(options_.d_model) + ") with 1 <= T <= block_size=" +
                                std::to_string(options_.block_size));
  }
  return through_blocks(x, 0, AttentionMask::causal(x.shape()[1]), nullptr);
}

Variable GPT::through_blocks(const Variable& x, int64_t start, const AttentionMask& causal, KvCache* cache) {
  Variable h = positioned(x, start);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (recompute_ && cache == nullptr) {
      TransformerBlock* block = &blocks_[i];
      h = ag::recompute(
          "TransformerBlock (recomputed)",
          [block, causal](const std::vector<Variable>& in) { return block->forward(in[0], causal); }, {h},
          block->parameters());
      continue;
    }
    h = blocks_[i].forward(h, causal, {}, cache ? cache->layer(static_cast<int64_t>(i)) : KvCacheLayer{});
  }
  return norm_(h);
}

Variable GPT::head(const Variable& h) {
  if (h.dim() < 1 || h.shape()[-1] != options_.d_model) {
    throw std::invalid_argument("GPT::head: features of shape " + h.shape().str() + " must be (..., d_model=" +
                                std::to_string(options_.d_model) + ")");
  }
  if (is_quantized()) return quantized_linear(h, head_quantized_, head_table());
  return linear(h, head_table());  // (..., d_model) x (vocab, d_model)^T: the tied head, no bias
}

void GPT::quantize(WeightFormat format) {
  const std::string who = std::string("GPT::quantize (") + format_name(format) + "): ";
  if (embed_.weight().dtype() != DType::f32) {
    throw std::invalid_argument(who + "the model is " + dtype_name(embed_.weight().dtype()) +
                                "; quantized weights serve float32 inference only (to(DType::f32) first)");
  }
  if (is_quantized()) {
    throw std::invalid_argument(who + "the model is already quantized (" + format_name(quantized_format()) + ")");
  }
  for (auto& [path, module] : named_modules()) {
    if (auto* l = dynamic_cast<Linear*>(module)) l->quantize_weights(format);
  }
  head_quantized_ = ag::quantize(head_table().value(), format);
}

Variable GPT::head_table() const {
  // The token table's first vocab rows: padding rows are never read.
  const Variable& table = embed_.weight();
  return table.shape()[0] == options_.vocab ? table : narrow(table, 0, 0, options_.vocab);
}

Variable GPT::forward(const Indices& ids) {
  check_ids(ids, "GPT::forward");
  return head(hidden(embed_(ids)));
}

Variable GPT::forward_embedded(const Variable& x) { return head(hidden(x)); }

Variable GPT::loss(const Indices& ids, const Indices& targets) {
  check_ids(ids, "GPT::loss");
  // The chunked head reads the float table; a quantized model scores its own (int8) logits.
  if (is_quantized()) return cross_entropy(forward(ids), targets);
  return linear_cross_entropy(hidden(embed_(ids)), head_table(), targets,
                              {.chunk_rows = linear_cross_entropy_chunk(options_.vocab)});
}

KvCache GPT::make_cache(int64_t batch) const {
  KvCacheOptions c;
  c.n_layers = options_.n_layers;
  c.batch = batch;
  c.n_head = options_.n_head;
  c.d_k = options_.d_model / options_.n_head;
  c.d_v = c.d_k;
  c.max_len = options_.block_size;
  c.dtype = embed_.weight().dtype();
  return KvCache(c);
}

Variable GPT::forward(const Indices& ids, KvCache& cache) {
  NoGradGuard no_grad;
  check_ids(ids, "GPT::forward (cached)");
  const KvCacheOptions& c = cache.options();
  const int64_t d_head = options_.d_model / options_.n_head;
  const DType dtype = embed_.weight().dtype();
  if (c.n_layers != options_.n_layers || c.n_head != options_.n_head || c.d_k != d_head || c.d_v != d_head ||
      c.batch != ids.shape[0] || c.dtype != dtype) {
    throw std::invalid_argument(
        "GPT::forward (cached): the cache (n_layers=" + std::to_string(c.n_layers) + ", batch=" +
        std::to_string(c.batch) + ", n_head=" + std::to_string(c.n_head) + ", d_k=" + std::to_string(c.d_k) +
        ", d_v=" + std::to_string(c.d_v) + ", " + dtype_name(c.dtype) + ") does not fit this model (n_layers=" +
        std::to_string(options_.n_layers) + ", n_head=" + std::to_string(options_.n_head) + ", d_head=" +
        std::to_string(d_head) + ", " + dtype_name(dtype) + ") with ids " + ids.shape.str() + "; use make_cache(" +
        std::to_string(ids.shape[0]) + ")");
  }
  const int64_t past = cache.length();
  const int64_t t_new = ids.shape[1];
  if (past + t_new > options_.block_size || past + t_new > c.max_len) {
    throw std::invalid_argument("GPT::forward (cached): the cache holds " + std::to_string(past) + " positions and ids " +
                                ids.shape.str() + " add " + std::to_string(t_new) + ", beyond block_size=" +
                                std::to_string(options_.block_size) + " (cache max_len=" + std::to_string(c.max_len) +
                                "); reset() the cache and feed the last tokens of the new window");
  }
  // The new positions see the cached ones and, among themselves, those before them.
  return head(through_blocks(embed_(ids), past, cache.causal_mask(0, t_new), &cache));
}

}  // namespace ag
