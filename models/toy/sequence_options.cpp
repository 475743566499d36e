#include "attograd/models/toy/sequence_options.h"

#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

// Each struct's fields in the order its checkpoints list them.
constexpr auto kSequenceModelFields = [](auto& o, auto&& field) {
  field("vocab", o.vocab), field("max_len", o.max_len), field("d_model", o.d_model), field("n_head", o.n_head);
  field("d_ff", o.d_ff), field("n_layers", o.n_layers), field("norm_first", o.norm_first);
  field("dropout", o.dropout), field("positional", o.positional, positional_kind_name, parse_positional_kind);
};

constexpr auto kSequenceTaskFields = [](auto& o, auto&& field) {
  field("task", o.kind, sequence_task_name, parse_sequence_task_kind);
  field("vocab_size", o.vocab_size), field("seq_len", o.seq_len), field("batch_size", o.batch_size);
  field("shift", o.shift), field("seed", o.seed), field("eval_seed", o.eval_seed);
};

}  // namespace

std::string sequence_model_options_to_json(const SequenceModelOptions& o) {
  return fields_to_json(o, kSequenceModelFields).dump();
}
SequenceModelOptions sequence_model_options_from_json(const std::string& text) {
  return options_from_json<SequenceModelOptions>(text, kSequenceModelFields, "sequence_model_options_from_json: ");
}

std::string sequence_task_options_to_json(const SequenceTaskOptions& o) {
  return fields_to_json(o, kSequenceTaskFields).dump();
}
SequenceTaskOptions sequence_task_options_from_json(const std::string& text) {
  return options_from_json<SequenceTaskOptions>(text, kSequenceTaskFields, "sequence_task_options_from_json: ");
}

}  // namespace ag
