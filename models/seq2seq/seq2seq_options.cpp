#include "attograd/models/seq2seq/seq2seq_options.h"

#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

// Each struct's fields in the order its checkpoints list them.
constexpr auto kSeq2SeqFields = [](auto& o, auto&& field) {
  field("src_vocab", o.src_vocab), field("tgt_vocab", o.tgt_vocab), field("max_len", o.max_len);
  field("d_model", o.d_model), field("n_head", o.n_head), field("d_ff", o.d_ff);
  field("n_encoder_layers", o.n_encoder_layers), field("n_decoder_layers", o.n_decoder_layers);
  field("dropout", o.dropout), field("norm_first", o.norm_first);
  field("activation", o.activation, activation_name, parse_activation);
  field("positional", o.positional, positional_kind_name, parse_positional_kind);
  field("share_embeddings", o.share_embeddings), field("tie_head", o.tie_head);
  field("scale_embeddings", o.scale_embeddings);
  // Added with the original Transformer's options: checkpoints written before read the defaults.
  field("input_norm", o.input_norm, kKeepIfAbsent), field("final_norm", o.final_norm, kKeepIfAbsent);
  field("layer_norm_eps", o.layer_norm_eps, kKeepIfAbsent), field("attn_bias", o.attn_bias, kKeepIfAbsent);
  field("d_k", o.d_k, kKeepIfAbsent), field("d_v", o.d_v, kKeepIfAbsent);
  field("scale_logits", o.scale_logits, kKeepIfAbsent);
};

constexpr auto kSeq2SeqTaskFields = [](auto& o, auto&& field) {
  field("task", o.kind, seq2seq_task_name, parse_seq2seq_task_kind);
  field("symbols", o.symbols), field("min_len", o.min_len), field("max_len", o.max_len);
  field("batch_size", o.batch_size), field("seed", o.seed), field("eval_seed", o.eval_seed);
};

}  // namespace

std::string seq2seq_options_to_json(const Seq2SeqOptions& o) {
  Seq2SeqOptions saved = o;
  if (saved.tgt_vocab == 0) saved.tgt_vocab = saved.src_vocab;
  return fields_to_json(saved, kSeq2SeqFields).dump();
}
Seq2SeqOptions seq2seq_options_from_json(const std::string& text) {
  return options_from_json<Seq2SeqOptions>(text, kSeq2SeqFields, "seq2seq_options_from_json: ");
}

std::string seq2seq_task_options_to_json(const Seq2SeqTaskOptions& o) {
  return fields_to_json(o, kSeq2SeqTaskFields).dump();
}
Seq2SeqTaskOptions seq2seq_task_options_from_json(const std::string& text) {
  return options_from_json<Seq2SeqTaskOptions>(text, kSeq2SeqTaskFields, "seq2seq_task_options_from_json: ");
}

}  // namespace ag
