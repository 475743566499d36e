#include "attograd/models/seq2seq/seq2seq.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/ops.h"

namespace ag {

namespace {

Seq2SeqOptions resolved(Seq2SeqOptions o) {
  if (o.tgt_vocab == 0) o.tgt_vocab = o.src_vocab;
  validate(o);
  return o;
}

TransformerBlockOptions block_options(const Seq2SeqOptions& o) {
  TransformerBlockOptions b;
  b.d_model = o.d_model;
  b.n_head = o.n_head;
  b.d_ff = o.d_ff;
  b.dropout = o.dropout;
  b.activation = o.activation;
  b.norm_first = o.norm_first;
  b.layer_norm_eps = o.layer_norm_eps;
  b.d_k = o.d_k;
  b.d_v = o.d_v;
  b.attn_bias = o.attn_bias;
  return b;
}

FinalNorm final_norm(const Seq2SeqOptions& o) { return o.final_norm ? FinalNorm::always : FinalNorm::never; }

TransformerEncoderOptions encoder_options(const Seq2SeqOptions& o) {
  return {.n_layers = o.n_encoder_layers, .block = block_options(o), .final_norm = final_norm(o)};
}

TransformerDecoderOptions decoder_options(const Seq2SeqOptions& o) {
  return {.n_layers = o.n_decoder_layers, .layer = {.block = block_options(o)}, .final_norm = final_norm(o)};
}

// The LayerNorm on one stack's input, or none.
LayerNorm* input_norm(Module& owner, const char* name, const Seq2SeqOptions& o) {
  if (!o.input_norm) return nullptr;
  return &owner.register_module(name, std::make_unique<LayerNorm>(o.d_model, o.layer_norm_eps));
}

std::unique_ptr<Embedding> token_table(int64_t vocab, int64_t d_model) {
  auto table = std::make_unique<Embedding>(vocab, d_model);
  Variable w = table->weight();
  w.mutable_value().copy_(normal(w.shape(), 0.0, 1.0 / std::sqrt(static_cast<double>(d_model)), default_generator(),
                                 w.dtype()));
  return table;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s.append(i ? ", " : "").append(std::to_string(v[i]));
  return s + "]";
}

}  // namespace

void validate(const Seq2SeqOptions& o) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("Seq2Seq: " + what); };
  const auto in_range = [&](const char* key, int64_t v, int64_t low, int64_t high) {
    if (v < low || v > high) {
      fail(std::string(key) + " must lie in [" + std::to_string(low) + ", " + std::to_string(high) + "], got " +
           std::to_string(v));
    }
  };
  using L = Seq2SeqLimits;
  in_range("src_vocab", o.src_vocab, 1, L::vocab);
  if (o.tgt_vocab != 0) in_range("tgt_vocab", o.tgt_vocab, 1, L::vocab);
  in_range("max_len", o.max_len, 1, L::max_len);
  in_range("d_model", o.d_model, 1, L::d_model);
  in_range("n_head", o.n_head, 1, L::n_head);
  in_range("d_ff", o.d_ff, 1, L::d_ff);
  in_range("n_encoder_layers", o.n_encoder_layers, 1, L::n_layers);
  in_range("n_decoder_layers", o.n_decoder_layers, 1, L::n_layers);
  in_range("d_k", o.d_k, 0, L::d_model);
  in_range("d_v", o.d_v, 0, L::d_model);
  if ((o.d_k == 0 || o.d_v == 0) && o.d_model % o.n_head != 0) {
    fail("n_head " + std::to_string(o.n_head) + " does not divide d_model " + std::to_string(o.d_model) +
         " (set d_k and d_v to give the heads sizes of their own)");
  }
  if (o.share_embeddings && o.tgt_vocab != 0 && o.tgt_vocab != o.src_vocab) {
    fail("share_embeddings needs one vocabulary, got src_vocab=" + std::to_string(o.src_vocab) +
         " tgt_vocab=" + std::to_string(o.tgt_vocab));
  }
  if (!(o.dropout >= 0.0 && o.dropout < 1.0)) {
    std::ostringstream os;
    os << "dropout must lie in [0, 1), got " << o.dropout;
    fail(os.str());
  }
  if (!(o.layer_norm_eps > 0.0 && o.layer_norm_eps <= 1.0)) {
    std::ostringstream os;
    os << "layer_norm_eps must lie in (0, 1], got " << o.layer_norm_eps;
    fail(os.str());
  }
}

Seq2Seq::Seq2Seq(const Seq2SeqOptions& options)
    : options_(resolved(options)),
      src_embed_(&register_module(options_.share_embeddings ? "embed" : "src_embed",
                                  token_table(options_.src_vocab, options_.d_model))),
      tgt_embed_(options_.share_embeddings
                     ? src_embed_
                     : &register_module("tgt_embed", token_table(options_.tgt_vocab, options_.d_model))),
      learned_pos_(options_.positional == PositionalKind::learned
                       ? &register_module("pos", std::make_unique<LearnedPositionalEmbedding>(options_.max_len,
                                                                                              options_.d_model))
                       : nullptr),
      sinusoidal_pos_(options_.positional == PositionalKind::sinusoidal
                          ? &register_module("pos", std::make_unique<SinusoidalPositionalEncoding>(
                                                        options_.d_model, options_.max_len))
                          : nullptr),
      dropout_(register_module("dropout", std::make_unique<Dropout>(options_.dropout))),
      src_norm_(input_norm(*this, "src_norm", options_)),
      tgt_norm_(input_norm(*this, "tgt_norm", options_)),
      encoder_(register_module("encoder", std::make_unique<TransformerEncoder>(encoder_options(options_)))),
      decoder_(register_module("decoder", std::make_unique<TransformerDecoder>(decoder_options(options_)))),
      head_(options_.tie_head ? nullptr
                              : &register_module("head", std::make_unique<Linear>(options_.d_model,
                                                                                  options_.tgt_vocab))) {}

const Variable& Seq2Seq::head_weight() const { return head_ ? head_->weight() : tgt_embed_->weight(); }

void Seq2Seq::check_tokens(const char* op, const char* what, const Indices& ids, int64_t vocab) const {
  if (ids.shape.rank() != 2 || ids.shape[0] < 1 || ids.shape[1] < 1 || ids.shape[1] > options_.max_len) {
    throw std::invalid_argument(std::string(op) + ": " + what + " of shape " + ids.shape.str() +
                                " must be (B, length) with 1 <= length <= max_len=" +
                                std::to_string(options_.max_len) + " (the positional table)");
  }
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      throw std::invalid_argument(std::string(op) + ": " + what + " token " + std::to_string(ids[i]) + " at (" +
                                  std::to_string(i / ids.shape[1]) + ", " + std::to_string(i % ids.shape[1]) +
                                  ") is outside [0, vocab=" + std::to_string(vocab) + ")");
    }
  }
}

void Seq2Seq::check_lengths(const char* op, const char* what, const std::vector<int64_t>& lengths, int64_t B,
                            int64_t T) const {
  bool ok = static_cast<int64_t>(lengths.size()) == B;
  for (int64_t l : lengths) ok = ok && l >= 1 && l <= T;
  if (!ok) {
    throw std::invalid_argument(std::string(op) + ": " + what + " " + list(lengths) + " must be " +
                                std::to_string(B) + " lengths (one per batch element), each in [1, " +
                                std::to_string(T) + "]");
  }
}

Variable Seq2Seq::positioned(const Variable& x, int64_t start, LayerNorm* input_norm, const char* op) {
  if (x.dim() != 3 || x.shape()[2] != options_.d_model || x.shape()[1] < 1 || start < 0 ||
      start + x.shape()[1] > options_.max_len) {
    throw std::invalid_argument(std::string(op) + ": embeddings of shape " + x.shape().str() + " at position " +
                                std::to_string(start) + " must be (B, T, d_model=" + std::to_string(options_.d_model) +
                                ") with 1 <= start + T <= max_len=" + std::to_string(options_.max_len));
  }
  require_dtype(x, dtype(), "embeddings");
  const int64_t T = x.shape()[1];
  const Variable scaled = options_.scale_embeddings ? x * std::sqrt(static_cast<double>(options_.d_model)) : x;
  const Variable table = learned_pos_ != nullptr
                             ? narrow(learned_pos_->weight(), 0, start, T)
                             : Variable(sinusoidal_pos_->encoding(start + T).narrow(0, start, T));
  const Variable y = dropout_(scaled + table);  // (T, d_model) broadcasts over B
  return input_norm != nullptr ? (*input_norm)(y) : y;
}

Variable Seq2Seq::head(const Variable& h) {
  if (h.dim() < 1 || h.shape()[-1] != options_.d_model) {
    throw std::invalid_argument("Seq2Seq::head: features of shape " + h.shape().str() + " must be (..., d_model=" +
                                std::to_string(options_.d_model) + ")");
  }
  const Variable logits = head_ ? (*head_)(h) : linear(h, tgt_embed_->weight());
  return options_.scale_logits ? logits * (1.0 / std::sqrt(static_cast<double>(options_.d_model))) : logits;
}

Variable Seq2Seq::encode_embedded(const Variable& src_x, const std::vector<int64_t>& src_lengths) {
  const Variable x = positioned(src_x, 0, src_norm_, "Seq2Seq::encode");
  check_lengths("Seq2Seq::encode", "src_lengths", src_lengths, x.shape()[0], x.shape()[1]);
  return encoder_(x, AttentionMask::key_padding(src_lengths, x.shape()[1]));
}

Variable Seq2Seq::encode(const Indices& src, const std::vector<int64_t>& src_lengths) {
  check_tokens("Seq2Seq::encode", "src", src, options_.src_vocab);
  check_lengths("Seq2Seq::encode", "src_lengths", src_lengths, src.shape[0], src.shape[1]);
  return encode_embedded((*src_embed_)(src), src_lengths);
}

Variable Seq2Seq::decode_embedded(const Variable& tgt_x, const Variable& memory,
                                  const std::vector<int64_t>& src_lengths, const std::vector<int64_t>& tgt_lengths,
                                  Seq2SeqCache* cache) {
  if (cache != nullptr && !tgt_lengths.empty()) {
    throw std::invalid_argument("Seq2Seq::decode: with a cache every target position is real; tgt_lengths " +
                                list(tgt_lengths) + " must be empty");
  }
  // With a cache, tgt continues the positions it holds.
  const Variable y = positioned(tgt_x, cache ? cache->self.length() : 0, tgt_norm_, "Seq2Seq::decode");
  const int64_t T = y.shape()[1];
  if (memory.dim() != 3 || memory.shape()[0] != y.shape()[0]) {
    throw std::invalid_argument("Seq2Seq::decode: memory " + memory.shape().str() + " must be (B=" +
                                std::to_string(y.shape()[0]) + ", S, d_model) for target " + y.shape().str());
  }
  check_lengths("Seq2Seq::decode", "src_lengths", src_lengths, memory.shape()[0], memory.shape()[1]);
  AttentionMask tgt_mask = cache ? cache->self.causal_mask(0, T) : AttentionMask::causal(T);
  if (!tgt_lengths.empty()) {
    check_lengths("Seq2Seq::decode", "tgt_lengths", tgt_lengths, y.shape()[0], T);
    tgt_mask &= AttentionMask::key_padding(tgt_lengths, T);
  }
  return head(decoder_(y, memory, tgt_mask, AttentionMask::key_padding(src_lengths, memory.shape()[1]),
                       cache ? &cache->self : nullptr, cache ? &cache->memory : nullptr));
}

Seq2SeqCache Seq2Seq::make_cache(int64_t batch, int64_t S) const {
  const MultiHeadAttentionOptions& heads = decoder_.layer(0).self_attn().options();  // d_k, d_v resolved
  KvCacheOptions c{.n_layers = options_.n_decoder_layers, .batch = batch, .n_head = options_.n_head, .d_k = heads.d_k,
                   .d_v = heads.d_v, .max_len = options_.max_len, .dtype = dtype()};
  KvCache self(c);
  c.max_len = S;
  return {std::move(self), KvCache(c)};
}

Variable Seq2Seq::decode(const Indices& tgt, const Variable& memory, const std::vector<int64_t>& src_lengths,
                         const std::vector<int64_t>& tgt_lengths, Seq2SeqCache* cache) {
  check_tokens("Seq2Seq::decode", "tgt", tgt, options_.tgt_vocab);
  return decode_embedded((*tgt_embed_)(tgt), memory, src_lengths, tgt_lengths, cache);
}

Variable Seq2Seq::forward_embedded(const Variable& src_x, const std::vector<int64_t>& src_lengths,
                                   const Variable& tgt_x, const std::vector<int64_t>& tgt_lengths) {
  if (src_x.dim() != 3 || tgt_x.dim() != 3 || src_x.shape()[0] != tgt_x.shape()[0]) {
    throw std::invalid_argument("Seq2Seq::forward: source embeddings " + src_x.shape().str() +
                                " and target embeddings " + tgt_x.shape().str() + " must be (B, S, d) and (B, T, d)");
  }
  check_lengths("Seq2Seq::forward", "tgt_lengths", tgt_lengths, tgt_x.shape()[0], tgt_x.shape()[1]);
  return decode_embedded(tgt_x, encode_embedded(src_x, src_lengths), src_lengths, tgt_lengths);
}

Variable Seq2Seq::forward(const Indices& src, const std::vector<int64_t>& src_lengths, const Indices& tgt,
                          const std::vector<int64_t>& tgt_lengths) {
  const char* op = "Seq2Seq::forward";
  check_tokens(op, "src", src, options_.src_vocab);
  check_tokens(op, "tgt", tgt, options_.tgt_vocab);
  if (src.shape[0] != tgt.shape[0]) {
    throw std::invalid_argument(std::string(op) + ": src " + src.shape.str() + " and tgt " + tgt.shape.str() +
                                " hold different batch sizes");
  }
  check_lengths(op, "src_lengths", src_lengths, src.shape[0], src.shape[1]);
  check_lengths(op, "tgt_lengths", tgt_lengths, tgt.shape[0], tgt.shape[1]);
  return forward_embedded((*src_embed_)(src), src_lengths, (*tgt_embed_)(tgt), tgt_lengths);
}

}  // namespace ag
