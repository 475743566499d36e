// Builders for every layer a fixture can name. Each reads the layer's options from `config`
// under our option names, with our defaults for keys the fixture leaves out.
#include "modules.h"

#include <stdexcept>

#include "attograd/layers/activation.h"
#include "attograd/layers/attention.h"
#include "attograd/layers/embedding.h"
#include "attograd/layers/feed_forward.h"
#include "attograd/layers/layer_norm.h"
#include "attograd/layers/linear.h"
#include "attograd/layers/transformer.h"
#include "attograd/layers/transformer_decoder.h"

namespace ag::parity {

namespace {

// A floating input that receives a gradient, registered under its fixture name.
Variable input(const Fixture& f, const std::string& name, ModuleRun& run) {
  Variable x(f.tensor("input." + name), /*requires_grad=*/true, name);
  run.inputs.emplace_back(name, x);
  return x;
}

// input.attn_bias, an additive bias on the scores that receives a gradient, when present.
AttentionBias read_bias(const Fixture& f, ModuleRun& run) {
  if (!f.has("input.attn_bias")) return AttentionBias();
  return AttentionBias(input(f, "attn_bias", run));
}

Activation read_activation(const Fixture& f, const Config& c) {
  const std::string name = c.string("activation", "relu");
  for (Activation a : {Activation::relu, Activation::gelu, Activation::gelu_tanh}) {
    if (name == activation_name(a)) return a;
  }
  f.fail("activation '" + name + "' is none of relu, gelu, gelu_tanh");
}

// Builds M from options, converts it and loads the parameters.
template <class M, class Options>
std::unique_ptr<M> build(const Fixture& f, const Options& options) {
  std::unique_ptr<M> m;
  try {
    m = std::make_unique<M>(options);
  } catch (const std::invalid_argument& e) {
    f.fail(std::string("config ") + f.config().dump_all() + " is not a valid " + f.module() + ": " + e.what());
  }
  prepare(*m, f);
  return m;
}

ModuleRun run_linear(const Fixture& f) {
  const Config& c = f.config();
  ModuleRun run;
  auto m = build<Linear>(f, LinearOptions{c.integer("in_features"), c.integer("out_features"),
                                          c.boolean("bias", true)});
  run.output = m->forward(input(f, "x", run));
  run.module = std::move(m);
  return run;
}

ModuleRun run_layer_norm(const Fixture& f) {
  const Config& c = f.config();
  ModuleRun run;
  auto m = build<LayerNorm>(f, LayerNormOptions{Shape(c.integers("normalized_shape")), c.number("eps", 1e-5),
                                                 c.boolean("elementwise_affine", true)});
  run.output = m->forward(input(f, "x", run));
  run.module = std::move(m);
  return run;
}

ModuleRun run_softmax(const Fixture& f) {
  ModuleRun run;
  auto m = build<Softmax>(f, SoftmaxOptions{f.config().integer("dim", -1)});
  run.output = m->forward(input(f, "x", run));
  run.module = std::move(m);
  return run;
}

ModuleRun run_embedding(const Fixture& f) {
  const Config& c = f.config();
  ModuleRun run;
  auto m = build<Embedding>(f, EmbeddingOptions{c.integer("num_embeddings"), c.integer("embedding_dim"),
                                                 c.optional_integer("padding_idx")});
  run.output = m->forward(f.indices("input.ids"));
  run.module = std::move(m);
  return run;
}

ModuleRun run_feed_forward(const Fixture& f) {
  const Config& c = f.config();
  PositionwiseFeedForwardOptions o;
  o.d_model = c.integer("d_model");
  o.d_hidden = c.integer("d_hidden", o.d_hidden);
  o.activation = read_activation(f, c);
  o.dropout = c.number("dropout", o.dropout);
  o.bias = c.boolean("bias", o.bias);
  f.require_comparable_dropout(o.dropout, "config.dropout");
  ModuleRun run;
  auto m = build<PositionwiseFeedForward>(f, o);
  run.output = m->forward(input(f, "x", run));
  run.module = std::move(m);
  return run;
}

ModuleRun run_sdpa(const Fixture& f) {
  const Config& c = f.config();
  ScaledDotProductAttentionOptions o;
  o.scale = c.number("scale", o.scale);
  o.temperature = c.number("temperature", o.temperature);
  o.dropout = c.number("dropout", o.dropout);
  f.require_comparable_dropout(o.dropout, "config.dropout");
  ModuleRun run;
  auto m = build<ScaledDotProductAttention>(f, o);
  const Variable q = input(f, "q", run), k = input(f, "k", run), v = input(f, "v", run);
  if (q.dim() != 4 || k.dim() != 4) {
    f.fail("input.q " + q.shape().str() + " and input.k " + k.shape().str() + " must be (B, H, T, d)");
  }
  const AttentionMask mask = read_mask(f, q.shape()[0], q.shape()[2], k.shape()[2]);
  AttentionOutput out = m->forward(q, k, v, mask, read_bias(f, run));
  run.output = out.output;
  if (f.has("expect.attn_weights")) run.extras.emplace_back("attn_weights", out.weights);
  run.module = std::move(m);
  return run;
}

ModuleRun run_multi_head_attention(const Fixture& f) {
  const Config& c = f.config();
  MultiHeadAttentionOptions o;
  o.d_model = c.integer("d_model");
  o.n_head = c.integer("n_head");
  o.d_k = c.integer("d_k", o.d_k);
  o.d_v = c.integer("d_v", o.d_v);
  o.q_dim = c.integer("q_dim", o.q_dim);
  o.k_dim = c.integer("k_dim", o.k_dim);
  o.v_dim = c.integer("v_dim", o.v_dim);
  o.bias = c.boolean("bias", o.bias);
  o.dropout = c.number("dropout", o.dropout);
  o.scale = c.number("scale", o.scale);
  o.temperature = c.number("temperature", o.temperature);
  f.require_comparable_dropout(o.dropout, "config.dropout");
  ModuleRun run;
  auto m = build<MultiHeadAttention>(f, o);
  // Self-attention fixtures hold one input x (its gradient sums the three uses); cross-attention
  // fixtures hold query, key and value.
  Variable query, key, value;
  if (f.has("input.x")) {
    query = key = value = input(f, "x", run);
  } else {
    query = input(f, "query", run);
    key = input(f, "key", run);
    value = input(f, "value", run);
  }
  if (query.dim() != 3 || key.dim() != 3) {
    f.fail("the attention inputs " + query.shape().str() + " and " + key.shape().str() + " must be (B, T, features)");
  }
  const AttentionMask mask = read_mask(f, query.shape()[0], query.shape()[1], key.shape()[1]);
  const bool need_weights = f.has("expect.attn_weights");
  AttentionOutput out = m->forward(query, key, value, mask, read_bias(f, run), need_weights);
  run.output = out.output;
  if (need_weights) run.extras.emplace_back("attn_weights", out.weights);
  run.module = std::move(m);
  return run;
}

TransformerBlockOptions block_options(const Fixture& f, const Config& c, const std::string& where) {
  TransformerBlockOptions o;
  o.d_model = c.integer("d_model");
  o.n_head = c.integer("n_head");
  o.d_ff = c.integer("d_ff", o.d_ff);
  o.dropout = c.number("dropout", o.dropout);
  o.attn_dropout = c.number("attn_dropout", o.attn_dropout);
  o.activation = read_activation(f, c);
  o.norm_first = c.boolean("norm_first", o.norm_first);
  o.layer_norm_eps = c.number("layer_norm_eps", o.layer_norm_eps);
  o.d_k = c.integer("d_k", o.d_k);
  o.d_v = c.integer("d_v", o.d_v);
  o.attn_bias = c.boolean("attn_bias", o.attn_bias);
  o.ff_bias = c.boolean("ff_bias", o.ff_bias);
  o.scale = c.number("scale", o.scale);
  o.temperature = c.number("temperature", o.temperature);
  f.require_comparable_dropout(o.dropout, where + "dropout");
  f.require_comparable_dropout(o.attn_dropout, where + "attn_dropout");
  return o;
}

// x: (B, T, d_model) with the fixture's mask over (B, ., T, T).
Variable sequence_input(const Fixture& f, ModuleRun& run, AttentionMask& mask) {
  const Variable x = input(f, "x", run);
  if (x.dim() != 3) f.fail("input.x " + x.shape().str() + " must be (B, T, d_model)");
  mask = read_mask(f, x.shape()[0], x.shape()[1], x.shape()[1]);
  return x;
}

ModuleRun run_transformer_block(const Fixture& f) {
  ModuleRun run;
  auto m = build<TransformerBlock>(f, block_options(f, f.config(), "config."));
  AttentionMask mask;
  const Variable x = sequence_input(f, run, mask);
  run.output = m->forward(x, mask, read_bias(f, run));
  run.module = std::move(m);
  return run;
}

ModuleRun run_transformer_encoder(const Fixture& f) {
  const Config& c = f.config();
  TransformerEncoderOptions o;
  o.n_layers = c.integer("n_layers");
  o.block = block_options(f, c.object("block"), "config.block.");
  ModuleRun run;
  auto m = build<TransformerEncoder>(f, o);
  AttentionMask mask;
  const Variable x = sequence_input(f, run, mask);
  run.output = m->forward(x, mask, read_bias(f, run));
  run.module = std::move(m);
  return run;
}

// tgt (B, T, d_model) and memory (B, S, d_memory): the fixture's masks (causal,
// mask.key_padding_lengths, mask.keep) are the target's self-attention mask over (B, ., T, T);
// mask.memory_key_padding_lengths (I64, (B)) is the cross-attention's over (B, ., T, S).
ModuleRun run_transformer_decoder_layer(const Fixture& f) {
  const Config& c = f.config();
  TransformerDecoderLayerOptions o;
  o.block = block_options(f, c.object("block"), "config.block.");
  o.d_memory = c.integer("d_memory", o.d_memory);
  ModuleRun run;
  auto m = build<TransformerDecoderLayer>(f, o);
  const Variable tgt = input(f, "tgt", run), memory = input(f, "memory", run);
  if (tgt.dim() != 3 || memory.dim() != 3 || tgt.shape()[0] != memory.shape()[0]) {
    f.fail("input.tgt " + tgt.shape().str() + " and input.memory " + memory.shape().str() +
           " must be (B, T, d_model) and (B, S, d_memory)");
  }
  const int64_t B = tgt.shape()[0], T = tgt.shape()[1], S = memory.shape()[1];
  const AttentionMask tgt_mask = read_mask(f, B, T, T);
  AttentionMask memory_mask;
  if (f.has("mask.memory_key_padding_lengths")) {
    const Indices lengths = f.indices("mask.memory_key_padding_lengths");
    if (lengths.shape != Shape{B}) {
      f.fail("mask.memory_key_padding_lengths " + lengths.shape.str() + " must hold one length per batch element (" +
             std::to_string(B) + ")");
    }
    try {
      memory_mask = AttentionMask::key_padding(lengths, S);
    } catch (const std::invalid_argument& e) {
      f.fail(std::string("bad memory mask: ") + e.what());
    }
  }
  run.output = m->forward(tgt, memory, tgt_mask, memory_mask);
  run.module = std::move(m);
  return run;
}

}  // namespace

void prepare(Module& module, const Fixture& f) {
  module.to(f.dtype());
  module.train(f.training());
  try {
    module.load_state_dict(f.params());
  } catch (const std::invalid_argument& e) {
    f.fail(std::string("the parameters do not fit the configured module: ") + e.what());
  }
}

AttentionMask read_mask(const Fixture& f, int64_t B, int64_t Tq, int64_t Tk) {
  AttentionMask mask;
  try {
    if (f.causal()) {
      if (Tq != Tk) {
        f.fail("a causal mask needs T_q == T_k, got " + std::to_string(Tq) + " and " + std::to_string(Tk));
      }
      mask &= AttentionMask::causal(Tq);
    }
    if (f.has("mask.key_padding_lengths")) {
      const Indices lengths = f.indices("mask.key_padding_lengths");
      if (lengths.shape != Shape{B}) {
        f.fail("mask.key_padding_lengths " + lengths.shape.str() + " must hold one length per batch element (" +
               std::to_string(B) + ")");
      }
      mask &= AttentionMask::key_padding(lengths, Tk);
    }
    if (f.has("mask.keep")) mask &= AttentionMask::keep(f.tensor("mask.keep"));
  } catch (const std::invalid_argument& e) {
    f.fail(std::string("bad mask: ") + e.what());
  }
  return mask;
}

const std::vector<std::string>& supported_modules() {
  static const std::vector<std::string> names = {
      "Linear", "LayerNorm", "Softmax", "Embedding", "PositionwiseFeedForward", "ScaledDotProductAttention",
      "MultiHeadAttention", "TransformerBlock", "TransformerEncoder", "TransformerDecoderLayer", "SequenceModel",
      "TrainingRun", "GPT", "GPTTrainingRun", "Seq2Seq", "Seq2SeqTrainingRun"};
  return names;
}

ModuleRun run_module(const Fixture& f) {
  const std::string& m = f.module();
  if (m == "Linear") return run_linear(f);
  if (m == "LayerNorm") return run_layer_norm(f);
  if (m == "Softmax") return run_softmax(f);
  if (m == "Embedding") return run_embedding(f);
  if (m == "PositionwiseFeedForward") return run_feed_forward(f);
  if (m == "ScaledDotProductAttention") return run_sdpa(f);
  if (m == "MultiHeadAttention") return run_multi_head_attention(f);
  if (m == "TransformerBlock") return run_transformer_block(f);
  if (m == "TransformerEncoder") return run_transformer_encoder(f);
  if (m == "TransformerDecoderLayer") return run_transformer_decoder_layer(f);
  if (m == "SequenceModel") return run_sequence_model(f);
  if (m == "GPT") return run_gpt(f);
  if (m == "Seq2Seq") return run_seq2seq(f);
  std::string known;
  for (const std::string& name : supported_modules()) known += (known.empty() ? "" : ", ") + name;
  f.fail("unknown module '" + m + "' (supported: " + known + ")");
}

}  // namespace ag::parity
