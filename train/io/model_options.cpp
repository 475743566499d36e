#include "attograd/train/io/model_options.h"

#include <optional>
#include <stdexcept>

#include "attograd/train/io/json_text.h"

namespace ag {


std::string sequence_model_options_to_json(const SequenceModelOptions& o) {
  const OrderedJson j = {
      {"vocab", o.vocab},       {"max_len", o.max_len},   {"d_model", o.d_model},
      {"n_head", o.n_head},     {"d_ff", o.d_ff},         {"n_layers", o.n_layers},
      {"norm_first", o.norm_first}, {"dropout", o.dropout}, {"positional", positional_kind_name(o.positional)},
  };
  return j.dump();
}

SequenceModelOptions sequence_model_options_from_json(const std::string& text) {
  const std::string op = "sequence_model_options_from_json: ";
  const Json j = parse_options_object(
      text, {"vocab", "max_len", "d_model", "n_head", "d_ff", "n_layers", "norm_first", "dropout", "positional"}, op);
  const OptionFields f{j, op, text};
  SequenceModelOptions o;
  o.vocab = f.integer("vocab");
  o.max_len = f.integer("max_len");
  o.d_model = f.integer("d_model");
  o.n_head = f.integer("n_head");
  o.d_ff = f.integer("d_ff");
  o.n_layers = f.integer("n_layers");
  o.norm_first = f.boolean("norm_first");
  o.dropout = f.number("dropout");
  o.positional = parse_positional_kind(f.string("positional"));
  validate(o);
  return o;
}

std::string gpt_options_to_json(const GPTOptions& o) {
  const OrderedJson j = {
      {"vocab", o.vocab},   {"block_size", o.block_size}, {"d_model", o.d_model}, {"n_head", o.n_head},
      {"n_layers", o.n_layers}, {"dropout", o.dropout},   {"bias", o.bias},
  };
  return j.dump();
}

GPTOptions gpt_options_from_json(const std::string& text) {
  const std::string op = "gpt_options_from_json: ";
  const Json j =
      parse_options_object(text, {"vocab", "block_size", "d_model", "n_head", "n_layers", "dropout", "bias"}, op);
  const OptionFields f{j, op, text};
  GPTOptions o;
  o.vocab = f.integer("vocab");
  o.block_size = f.integer("block_size");
  o.d_model = f.integer("d_model");
  o.n_head = f.integer("n_head");
  o.n_layers = f.integer("n_layers");
  o.dropout = f.number("dropout");
  o.bias = f.boolean("bias");
  return validated(o, op);
}

std::string seq2seq_options_to_json(const Seq2SeqOptions& o) {
  const OrderedJson j = {
      {"src_vocab", o.src_vocab},
      {"tgt_vocab", o.tgt_vocab == 0 ? o.src_vocab : o.tgt_vocab},
      {"max_len", o.max_len},
      {"d_model", o.d_model},
      {"n_head", o.n_head},
      {"d_ff", o.d_ff},
      {"n_encoder_layers", o.n_encoder_layers},
      {"n_decoder_layers", o.n_decoder_layers},
      {"dropout", o.dropout},
      {"norm_first", o.norm_first},
      {"activation", activation_name(o.activation)},
      {"positional", positional_kind_name(o.positional)},
      {"share_embeddings", o.share_embeddings},
      {"tie_head", o.tie_head},
      {"scale_embeddings", o.scale_embeddings},
  };
  return j.dump();
}

Seq2SeqOptions seq2seq_options_from_json(const std::string& text) {
  const std::string op = "seq2seq_options_from_json: ";
  const Json j = parse_options_object(
      text, {"src_vocab", "tgt_vocab", "max_len", "d_model", "n_head", "d_ff", "n_encoder_layers", "n_decoder_layers",
             "dropout", "norm_first", "activation", "positional", "share_embeddings", "tie_head", "scale_embeddings"},
      op);
  const OptionFields f{j, op, text};
  Seq2SeqOptions o;
  o.src_vocab = f.integer("src_vocab");
  o.tgt_vocab = f.integer("tgt_vocab");
  o.max_len = f.integer("max_len");
  o.d_model = f.integer("d_model");
  o.n_head = f.integer("n_head");
  o.d_ff = f.integer("d_ff");
  o.n_encoder_layers = f.integer("n_encoder_layers");
  o.n_decoder_layers = f.integer("n_decoder_layers");
  o.dropout = f.number("dropout");
  o.norm_first = f.boolean("norm_first");
  try {
    o.activation = parse_activation(f.string("activation"));
    o.positional = parse_positional_kind(f.string("positional"));
    o.share_embeddings = f.boolean("share_embeddings");
    o.tie_head = f.boolean("tie_head");
    o.scale_embeddings = f.boolean("scale_embeddings");
    validate(o);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw std::invalid_argument(what.rfind(op, 0) == 0 ? what : op + what);
  }
  return o;
}

}  // namespace ag
