#include "attograd/models/llama/llama.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"
#include "attograd/autograd/recompute.h"
#include "attograd/layers/init.h"

namespace ag {

namespace {

// Upper bounds of what a command line or a config.json may ask for.
struct LlamaLimits {
  static constexpr int64_t vocab = int64_t{1} << 22;
  static constexpr int64_t max_positions = int64_t{1} << 22;
  static constexpr int64_t d_model = int64_t{1} << 16;
  static constexpr int64_t n_head = int64_t{1} << 12;
  static constexpr int64_t head_dim = int64_t{1} << 12;
  static constexpr int64_t d_hidden = int64_t{1} << 20;
  static constexpr int64_t n_layers = 1024;
};

const LlamaOptions& checked(const LlamaOptions& options) {
  validate(options);
  return options;
}

LlamaBlockOptions block_options(const LlamaOptions& o) {
  LlamaBlockOptions b;
  b.attention.d_model = o.d_model;
  b.attention.n_head = o.n_head;
  b.attention.n_kv_head = o.n_kv_head;
  b.attention.head_dim = o.head_dim;
  b.attention.qkv_bias = o.attention_bias;
  b.attention.qk_norm = o.qk_norm;
  b.attention.rotary.max_positions = o.max_positions;
  b.attention.rotary.theta = o.rope_theta;
  b.attention.rotary.scaling = o.rope_scaling;
  b.d_hidden = o.d_hidden;
  b.norm_eps = o.rms_norm_eps;
  return b;
}

}  // namespace

LlamaOptions resolved(LlamaOptions o) {
  if (o.n_kv_head == 0) o.n_kv_head = o.n_head;
  if (o.head_dim == 0 && o.n_head > 0 && o.d_model % o.n_head == 0) o.head_dim = o.d_model / o.n_head;
  return o;
}

void validate(const LlamaOptions& given) {
  const LlamaOptions o = resolved(given);
  const auto in_range = [](const char* key, int64_t v, int64_t low, int64_t high) {
    if (v < low || v > high) {
      throw std::invalid_argument(std::string("Llama: ") + key + " must lie in [" + std::to_string(low) + ", " +
                                  std::to_string(high) + "], got " + std::to_string(v));
    }
  };
  using L = LlamaLimits;
  in_range("vocab", o.vocab, 1, L::vocab);
  in_range("max_positions", o.max_positions, 1, L::max_positions);
  in_range("d_model", o.d_model, 1, L::d_model);
  in_range("n_layers", o.n_layers, 1, L::n_layers);
  in_range("n_head", o.n_head, 1, L::n_head);
  in_range("n_kv_head", o.n_kv_head, 1, o.n_head);
  in_range("d_hidden", o.d_hidden, 1, L::d_hidden);
  if (o.n_head % o.n_kv_head != 0) {
    throw std::invalid_argument("Llama: n_kv_head=" + std::to_string(o.n_kv_head) + " must divide n_head=" +
                                std::to_string(o.n_head));
  }
  if (o.head_dim == 0) {
    throw std::invalid_argument("Llama: d_model=" + std::to_string(o.d_model) + " is not divisible by n_head=" +
                                std::to_string(o.n_head) + "; give head_dim");
  }
  in_range("head_dim", o.head_dim, 2, L::head_dim);
  if (o.head_dim % 2 != 0) throw std::invalid_argument("Llama: head_dim must be even, got " + std::to_string(o.head_dim));
  if (!(o.rms_norm_eps > 0.0) || !std::isfinite(o.rms_norm_eps)) {
    throw std::invalid_argument("Llama: rms_norm_eps must be finite and > 0, got " + std::to_string(o.rms_norm_eps));
  }
  RotaryOptions r;
  r.head_dim = o.head_dim;
  r.max_positions = o.max_positions;
  r.theta = o.rope_theta;
  r.scaling = o.rope_scaling;
  rotary_inverse_frequencies(r);  // throws naming theta or the scaling
}

const std::vector<std::string>& llama_preset_names() {
  static const std::vector<std::string> names = {"llama-tiny", "smollm2-135m", "qwen3-0.6b", "llama3.2-1b"};
  return names;
}

LlamaOptions llama_preset(const std::string& name) {
  LlamaOptions o;
  if (name == "llama-tiny") {
    o = {.vocab = 256, .max_positions = 256, .d_model = 128, .n_layers = 4, .n_head = 4, .n_kv_head = 2,
         .head_dim = 0, .d_hidden = 384, .rms_norm_eps = 1e-5, .rope_theta = 10000.0, .rope_scaling = {},
         .tie_word_embeddings = true, .attention_bias = false, .qk_norm = false};
  } else if (name == "smollm2-135m") {
    o = {.vocab = 49152, .max_positions = 8192, .d_model = 576, .n_layers = 30, .n_head = 9, .n_kv_head = 3,
         .head_dim = 0, .d_hidden = 1536, .rms_norm_eps = 1e-5, .rope_theta = 100000.0, .rope_scaling = {},
         .tie_word_embeddings = true, .attention_bias = false, .qk_norm = false};
  } else if (name == "qwen3-0.6b") {
    o = {.vocab = 151936, .max_positions = 40960, .d_model = 1024, .n_layers = 28, .n_head = 16, .n_kv_head = 8,
         .head_dim = 128, .d_hidden = 3072, .rms_norm_eps = 1e-6, .rope_theta = 1000000.0, .rope_scaling = {},
         .tie_word_embeddings = true, .attention_bias = false, .qk_norm = true};
  } else if (name == "llama3.2-1b") {
    RopeScaling s;
    s.kind = RopeScaling::Kind::llama3;
    s.factor = 32.0;
    o = {.vocab = 128256, .max_positions = 131072, .d_model = 2048, .n_layers = 16, .n_head = 32, .n_kv_head = 8,
         .head_dim = 64, .d_hidden = 8192, .rms_norm_eps = 1e-5, .rope_theta = 500000.0, .rope_scaling = s,
         .tie_word_embeddings = true, .attention_bias = false, .qk_norm = false};
  } else {
    std::string known;
    for (const std::string& n : llama_preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("Llama: unknown preset '" + name + "' (known: " + known + ")");
  }
  return resolved(o);
}

int64_t llama_parameter_count(const LlamaOptions& given) {
  const LlamaOptions o = resolved(given);
  const int64_t q = o.n_head * o.head_dim, kv = o.n_kv_head * o.head_dim;
  int64_t block = o.d_model * q + 2 * o.d_model * kv + q * o.d_model  // q, k, v, o projections
                  + 3 * o.d_model * o.d_hidden                        // gate, up, down
                  + 2 * o.d_model;                                    // the two norms
  if (o.attention_bias) block += q + 2 * kv;
  if (o.qk_norm) block += 2 * o.head_dim;
  const int64_t table = o.vocab * o.d_model;
  return table + o.n_layers * block + o.d_model + (o.tie_word_embeddings ? 0 : table);
}

LlamaBody::LlamaBody(const LlamaOptions& o)
    : embed_tokens_(register_module("embed_tokens", std::make_unique<Embedding>(o.vocab, o.d_model))),
      layers_(register_module("layers", std::make_unique<ModuleList<LlamaBlock>>())),
      norm_(register_module("norm", std::make_unique<RMSNorm>(o.d_model, o.rms_norm_eps))) {
  for (int64_t i = 0; i < o.n_layers; ++i) layers_.push_back(std::make_unique<LlamaBlock>(block_options(o)));
}

Llama::Llama(const LlamaOptions& options)
    : options_(resolved(checked(options))), model_(register_module("model", std::make_unique<LlamaBody>(options_))) {
  if (!options_.tie_word_embeddings) {
    lm_head_ = &register_module("lm_head", std::make_unique<Linear>(LinearOptions{options_.d_model, options_.vocab, false}));
  }
  init_weights();
}

void Llama::init_weights() {
  constexpr double kStd = 0.02;  // Hugging Face's initializer_range
  init_normal(model_.embed_tokens().weight(), kStd);
  for (LlamaBlock* b : model_.layers_) {
    GroupedQueryAttention& a = b->self_attn();
    for (Linear* l : {&a.q_proj(), &a.k_proj(), &a.v_proj(), &a.o_proj(), &b->mlp().gate_proj(),
                      &b->mlp().up_proj(), &b->mlp().down_proj()}) {
      init_linear(*l, kStd);
    }
  }
  if (lm_head_) init_linear(*lm_head_, kStd);
}

const Variable& Llama::head_weight() const {
  return lm_head_ ? lm_head_->weight() : model_.embed_tokens_.weight();
}

void Llama::check_ids(const Indices& ids, const char* op) const {
  if (ids.shape.rank() != 2 || ids.shape[0] < 1 || ids.shape[1] < 1 || ids.shape[1] > options_.max_positions) {
    throw std::invalid_argument(std::string(op) + ": ids of shape " + ids.shape.str() +
                                " must be (B, T) with 1 <= T <= max_positions=" +
                                std::to_string(options_.max_positions));
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

Variable Llama::through_blocks(const Variable& x, const AttentionMask& causal, KvCache* cache) {
  Variable h = x;
  for (size_t i = 0; i < model_.num_layers(); ++i) {
    LlamaBlock* block = &model_.layer(i);
    if (recompute_ && cache == nullptr) {
      h = ag::recompute(
          "LlamaBlock (recomputed)", [block, causal](const std::vector<Variable>& in) { return block->forward(in[0], causal); },
          {h}, block->parameters());
      continue;
    }
    h = block->forward(h, causal, cache ? cache->layer(static_cast<int64_t>(i)) : KvCacheLayer{});
  }
  return model_.norm()(h);
}

Variable Llama::hidden(const Variable& x) {
  if (x.dim() != 3 || x.shape()[2] != options_.d_model || x.shape()[1] < 1 ||
      x.shape()[1] > options_.max_positions) {
    throw std::invalid_argument("Llama: token embeddings of shape " + x.shape().str() + " must be (B, T, d_model=" +
                                std::to_string(options_.d_model) + ") with 1 <= T <= max_positions=" +
                                std::to_string(options_.max_positions));
  }
  return through_blocks(x, AttentionMask::causal(x.shape()[1]), nullptr);
}

Variable Llama::head(const Variable& h) {
  if (h.dim() < 1 || h.shape()[-1] != options_.d_model) {
    throw std::invalid_argument("Llama::head: features of shape " + h.shape().str() + " must be (..., d_model=" +
                                std::to_string(options_.d_model) + ")");
  }
  if (quantized_) return quantized_linear(h, lm_head_ ? lm_head_->quantized_weight() : tied_head_, head_weight());
  return linear(h, head_weight());
}

void Llama::quantize(WeightFormat format) {
  const std::string who = std::string("Llama::quantize (") + format_name(format) + "): ";
  if (model_.embed_tokens_.weight().dtype() != DType::f32) {
    throw std::invalid_argument(who + "the model is " + dtype_name(model_.embed_tokens_.weight().dtype()) +
                                "; quantized weights serve float32 inference only (to(DType::f32) first)");
  }
  if (quantized_) throw std::invalid_argument(who + "the model is already quantized");
  for (auto& [path, module] : named_modules()) {
    if (auto* l = dynamic_cast<Linear*>(module)) l->quantize_weights(format);
  }
  if (!lm_head_) tied_head_ = ag::quantize(head_weight().value(), format);
  quantized_ = true;
}

Variable Llama::forward(const Indices& ids) {
  check_ids(ids, "Llama::forward");
  return head(hidden(model_.embed_tokens()(ids)));
}

Variable Llama::forward_embedded(const Variable& x) { return head(hidden(x)); }

Variable Llama::loss(const Indices& ids, const Indices& targets) {
  check_ids(ids, "Llama::loss");
  // The chunked head reads the float table; a quantized model scores its own logits.
  if (quantized_) return cross_entropy(forward(ids), targets);
  return linear_cross_entropy(hidden(model_.embed_tokens()(ids)), head_weight(), targets,
                              {.chunk_rows = linear_cross_entropy_chunk(options_.vocab)});
}

KvCache Llama::make_cache(int64_t batch, int64_t max_len) const {
  KvCacheOptions c;
  c.n_layers = options_.n_layers;
  c.batch = batch;
  c.n_head = options_.n_kv_head;
  c.d_k = options_.head_dim;
  c.d_v = options_.head_dim;
  c.max_len = max_len > 0 ? std::min(max_len, options_.max_positions) : options_.max_positions;
  c.dtype = model_.embed_tokens_.weight().dtype();
  return KvCache(c);
}

Variable Llama::forward(const Indices& ids, KvCache& cache) {
  NoGradGuard no_grad;
  check_ids(ids, "Llama::forward (cached)");
  const KvCacheOptions& c = cache.options();
  const DType dtype = model_.embed_tokens_.weight().dtype();
  if (c.n_layers != options_.n_layers || c.n_head != options_.n_kv_head || c.d_k != options_.head_dim ||
      c.d_v != options_.head_dim || c.batch != ids.shape[0] || c.dtype != dtype) {
    throw std::invalid_argument(
        "Llama::forward (cached): the cache (n_layers=" + std::to_string(c.n_layers) + ", batch=" +
        std::to_string(c.batch) + ", n_head=" + std::to_string(c.n_head) + ", d_k=" + std::to_string(c.d_k) + ", " +
        dtype_name(c.dtype) + ") does not fit this model (n_layers=" + std::to_string(options_.n_layers) +
        ", n_kv_head=" + std::to_string(options_.n_kv_head) + ", head_dim=" + std::to_string(options_.head_dim) +
        ", " + dtype_name(dtype) + ") with ids " + ids.shape.str() + "; use make_cache(" +
        std::to_string(ids.shape[0]) + ")");
  }
  const int64_t past = cache.length(), t_new = ids.shape[1];
  if (past + t_new > c.max_len || past + t_new > options_.max_positions) {
    throw std::invalid_argument("Llama::forward (cached): the cache holds " + std::to_string(past) +
                                " positions and ids " + ids.shape.str() + " add " + std::to_string(t_new) +
                                ", beyond its max_len=" + std::to_string(c.max_len) + " (max_positions=" +
                                std::to_string(options_.max_positions) + ")");
  }
  return head(through_blocks(model_.embed_tokens()(ids), cache.causal_mask(0, t_new), &cache));
}

}  // namespace ag
