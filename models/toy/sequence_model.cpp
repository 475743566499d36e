#include "attograd/models/toy/sequence_model.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/ops.h"
#include "attograd/core/format.h"

namespace ag {

namespace {

const SequenceModelOptions& checked(const SequenceModelOptions& options) {
  validate(options);
  return options;
}

TransformerEncoderOptions encoder_options(const SequenceModelOptions& o) {
  TransformerEncoderOptions e;
  e.n_layers = o.n_layers;
  e.block.d_model = o.d_model;
  e.block.n_head = o.n_head;
  e.block.d_ff = o.d_ff;
  e.block.dropout = o.dropout;
  e.block.norm_first = o.norm_first;
  return e;
}

}  // namespace

void validate(const SequenceModelOptions& o) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("SequenceModel: " + what); };
  const auto in_range = [&](const char* key, int64_t v, int64_t low, int64_t high) {
    if (v < low || v > high) {
      fail(std::string(key) + " must lie in [" + std::to_string(low) + ", " + std::to_string(high) + "], got " +
           std::to_string(v));
    }
  };
  using L = SequenceModelLimits;
  in_range("vocab", o.vocab, 2, L::vocab);
  in_range("max_len", o.max_len, 1, L::max_len);
  in_range("d_model", o.d_model, 1, L::d_model);
  in_range("n_head", o.n_head, 1, L::n_head);
  in_range("d_ff", o.d_ff, 1, L::d_ff);
  in_range("n_layers", o.n_layers, 1, L::n_layers);
  if (o.d_model % o.n_head != 0) {
    fail("n_head " + std::to_string(o.n_head) + " does not divide d_model " + std::to_string(o.d_model));
  }
  if (!(o.dropout >= 0.0 && o.dropout < 1.0)) {
    std::ostringstream os;
    os << "dropout must lie in [0, 1), got " << o.dropout;
    fail(os.str());
  }
}

SequenceModel::SequenceModel(const SequenceModelOptions& options)
    : options_(checked(options)),
      embed_(register_module("embed", std::make_unique<Embedding>(options.vocab, options.d_model))),
      learned_pos_(options.positional == PositionalKind::learned
                       ? &register_module("pos", std::make_unique<LearnedPositionalEmbedding>(options.max_len,
                                                                                              options.d_model))
                       : nullptr),
      sinusoidal_pos_(options.positional == PositionalKind::sinusoidal
                          ? &register_module("pos", std::make_unique<SinusoidalPositionalEncoding>(options.d_model,
                                                                                                   options.max_len))
                          : nullptr),
      dropout_(register_module("dropout", std::make_unique<Dropout>(options.dropout))),
      encoder_(register_module("encoder", std::make_unique<TransformerEncoder>(encoder_options(options)))),
      head_(register_module("head", std::make_unique<Linear>(options.d_model, options.vocab))) {}

Variable SequenceModel::forward(const Indices& ids, const AttentionMask& mask) {
  if (ids.shape.rank() != 2 || ids.shape[1] > options_.max_len || ids.shape[1] < 1) {
    throw std::invalid_argument("SequenceModel: ids of shape " + ids.shape.str() + " must be (B, T) with 1 <= T <= max_len=" +
                                std::to_string(options_.max_len));
  }
  return forward_embedded(embed_(ids), mask);  // the Embedding names any id outside [0, vocab)
}

Variable SequenceModel::forward_embedded(const Variable& x, const AttentionMask& mask) {
  if (x.dim() != 3 || x.shape()[-1] != options_.d_model || x.shape()[1] > options_.max_len) {
    throw std::invalid_argument("SequenceModel: embedded input of shape " + x.shape().str() +
                                " must be (B, T, d_model=" + std::to_string(options_.d_model) +
                                ") with T <= max_len=" + std::to_string(options_.max_len));
  }
  const Variable positioned = learned_pos_ != nullptr ? learned_pos_->forward(x) : sinusoidal_pos_->forward(x);
  return head_(encoder_(dropout_(positioned), mask));
}

}  // namespace ag
