#include "attograd/models/gpt/gpt_options.h"

#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

// Each struct's fields in the order its checkpoints list them.
constexpr auto kGPTFields = [](auto& o, auto&& field) {
  field("vocab", o.vocab), field("block_size", o.block_size), field("d_model", o.d_model);
  field("n_head", o.n_head), field("n_layers", o.n_layers), field("dropout", o.dropout), field("bias", o.bias);
  // Added for GPT-2: checkpoints written before read the exact GELU and an unpadded table.
  field("activation", o.activation, activation_name, parse_activation, kKeepIfAbsent);
  field("vocab_multiple", o.vocab_multiple, kKeepIfAbsent);
};

}  // namespace

std::string gpt_options_to_json(const GPTOptions& o) { return fields_to_json(o, kGPTFields).dump(); }
GPTOptions gpt_options_from_json(const std::string& text) {
  return options_from_json<GPTOptions>(text, kGPTFields, "gpt_options_from_json: ");
}

std::string GPT::options_json() const { return gpt_options_to_json(options_); }

}  // namespace ag
