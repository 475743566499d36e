#include "attograd/train/model_options.h"

#include <optional>
#include <stdexcept>

#include "attograd/train/json_text.h"

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
  const auto field = [&](const char* key) -> const Json& {
    const auto it = j.find(key);
    if (it == j.end()) throw std::invalid_argument(op + "missing \"" + key + "\" in " + text);
    return *it;
  };
  const auto integer = [&](const char* key) {
    const Json& v = field(key);
    const std::optional<int64_t> i = json_int64(v);
    if (!i) throw std::invalid_argument(op + "\"" + key + "\" must be an integer, got " + v.dump());
    return *i;
  };
  SequenceModelOptions o;
  o.vocab = integer("vocab");
  o.max_len = integer("max_len");
  o.d_model = integer("d_model");
  o.n_head = integer("n_head");
  o.d_ff = integer("d_ff");
  o.n_layers = integer("n_layers");
  const Json& norm_first = field("norm_first");
  if (!norm_first.is_boolean()) throw std::invalid_argument(op + "\"norm_first\" must be a boolean, got " + norm_first.dump());
  o.norm_first = norm_first.get<bool>();
  const Json& dropout = field("dropout");
  if (!dropout.is_number()) throw std::invalid_argument(op + "\"dropout\" must be a number, got " + dropout.dump());
  o.dropout = dropout.get<double>();
  const Json& positional = field("positional");
  if (!positional.is_string()) {
    throw std::invalid_argument(op + "\"positional\" must be a string, got " + positional.dump());
  }
  o.positional = parse_positional_kind(positional.get<std::string>());
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
  const auto field = [&](const char* key) -> const Json& {
    const auto it = j.find(key);
    if (it == j.end()) throw std::invalid_argument(op + "missing \"" + key + "\" in " + text);
    return *it;
  };
  const auto integer = [&](const char* key) {
    const Json& v = field(key);
    const std::optional<int64_t> i = json_int64(v);
    if (!i) throw std::invalid_argument(op + "\"" + key + "\" must be an integer, got " + v.dump());
    return *i;
  };
  GPTOptions o;
  o.vocab = integer("vocab");
  o.block_size = integer("block_size");
  o.d_model = integer("d_model");
  o.n_head = integer("n_head");
  o.n_layers = integer("n_layers");
  const Json& dropout = field("dropout");
  if (!dropout.is_number()) throw std::invalid_argument(op + "\"dropout\" must be a number, got " + dropout.dump());
  o.dropout = dropout.get<double>();
  const Json& bias = field("bias");
  if (!bias.is_boolean()) throw std::invalid_argument(op + "\"bias\" must be a boolean, got " + bias.dump());
  o.bias = bias.get<bool>();
  try {
    validate(o);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(op + e.what());
  }
  return o;
}

}  // namespace ag
