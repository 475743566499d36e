// The Seq2Seq of models/seq2seq/seq2seq.h against torch.nn.Transformer with embeddings, positions and a
// head around it, or with the seed's options (input norms, no final norms, d_k / d_v, ...) against
// the seed's model composed by hand (both in tests/parity/torch_seq2seq.py): module "Seq2Seq"
// compares the logits for input.src / input.tgt with their lengths (input.src_lengths,
// input.tgt_lengths, I64 (B)) and every parameter's gradient; module "Seq2SeqTrainingRun" trains
// it with AdamW on stored padded batches and compares the loss at every step.
#include <stdexcept>

#include "attograd/autograd/nn_ops.h"
#include "attograd/models/seq2seq/seq2seq.h"
#include "modules.h"

namespace ag::parity {

namespace {

Seq2SeqOptions read_seq2seq_options(const Fixture& f, const Config& c) {
  Seq2SeqOptions o;
  o.src_vocab = c.integer("src_vocab");
  o.tgt_vocab = c.integer("tgt_vocab", o.tgt_vocab);
  o.max_len = c.integer("max_len");
  o.d_model = c.integer("d_model");
  o.n_head = c.integer("n_head");
  o.d_ff = c.integer("d_ff", o.d_ff);
  o.n_encoder_layers = c.integer("n_encoder_layers", o.n_encoder_layers);
  o.n_decoder_layers = c.integer("n_decoder_layers", o.n_decoder_layers);
  o.dropout = c.number("dropout", o.dropout);
  o.norm_first = c.boolean("norm_first", o.norm_first);
  const std::string activation = c.string("activation", "relu");
  if (activation != "relu" && activation != "gelu") f.fail("config.activation '" + activation + "' is neither relu nor gelu");
  o.activation = activation == "relu" ? Activation::relu : Activation::gelu;
  try {
    o.positional = parse_positional_kind(c.string("positional", positional_kind_name(o.positional)));
  } catch (const std::invalid_argument& e) {
    f.fail(std::string("config.positional: ") + e.what());
  }
  o.share_embeddings = c.boolean("share_embeddings", o.share_embeddings);
  o.tie_head = c.boolean("tie_head", o.tie_head);
  o.scale_embeddings = c.boolean("scale_embeddings", o.scale_embeddings);
  o.input_norm = c.boolean("input_norm", o.input_norm);
  o.final_norm = c.boolean("final_norm", o.final_norm);
  o.layer_norm_eps = c.number("layer_norm_eps", o.layer_norm_eps);
  o.attn_bias = c.boolean("attn_bias", o.attn_bias);
  o.d_k = c.integer("d_k", o.d_k);
  o.d_v = c.integer("d_v", o.d_v);
  o.scale_logits = c.boolean("scale_logits", o.scale_logits);
  f.require_comparable_dropout(o.dropout, "config.dropout");
  return o;
}

std::vector<int64_t> lengths(const Fixture& f, const std::string& name, int64_t B) {
  const Indices l = f.indices(name);
  if (l.shape != Shape{B}) f.fail(name + " " + l.shape.str() + " must hold one length per batch element (" + std::to_string(B) + ")");
  return l.data;
}

std::unique_ptr<Seq2Seq> build_seq2seq(const Fixture& f, const Config& c) {
  const Seq2SeqOptions o = read_seq2seq_options(f, c);
  std::unique_ptr<Seq2Seq> m;
  try {
    m = std::make_unique<Seq2Seq>(o);
  } catch (const std::invalid_argument& e) {
    f.fail("config " + c.dump_all() + " is not a valid Seq2Seq: " + e.what());
  }
  prepare(*m, f);
  return m;
}

}  // namespace

ModuleRun run_seq2seq(const Fixture& f) {
  std::unique_ptr<Seq2Seq> m = build_seq2seq(f, f.config());
  const Indices src = f.indices("input.src"), tgt = f.indices("input.tgt");
  if (src.shape.rank() != 2 || tgt.shape.rank() != 2) {
    f.fail("input.src " + src.shape.str() + " and input.tgt " + tgt.shape.str() + " must be (B, S) and (B, T)");
  }
  const std::vector<int64_t> src_lengths = lengths(f, "input.src_lengths", src.shape[0]);
  const std::vector<int64_t> tgt_lengths = lengths(f, "input.tgt_lengths", tgt.shape[0]);
  ModuleRun run;
  try {
    run.output = m->forward(src, src_lengths, tgt, tgt_lengths);  // logits (B, T, tgt_vocab)
  } catch (const std::invalid_argument& e) {
    f.fail(std::string("the inputs do not fit the model: ") + e.what());
  }
  run.module = std::move(m);
  return run;
}

std::vector<TensorComparison> run_seq2seq_training(const Fixture& f) {
  std::unique_ptr<Seq2Seq> m = build_seq2seq(f, f.config().object("model"));
  const int64_t steps = f.config().integer("steps");
  const Indices src = f.indices("input.src"), tgt = f.indices("input.tgt"), targets = f.indices("input.targets");
  const Indices src_lengths = f.indices("input.src_lengths"), tgt_lengths = f.indices("input.tgt_lengths");
  if (src.shape.rank() != 3 || src.shape[0] != steps || tgt.shape.rank() != 3 || targets.shape != tgt.shape ||
      src_lengths.shape != Shape{steps, src.shape[1]} || tgt_lengths.shape != Shape{steps, tgt.shape[1]}) {
    f.fail("input.src " + src.shape.str() + ", input.tgt " + tgt.shape.str() + ", input.targets " +
           targets.shape.str() + " and the lengths " + src_lengths.shape.str() + ", " + tgt_lengths.shape.str() +
           " must be (steps=" + std::to_string(steps) + ", B, S), (steps, B, T) twice and (steps, B) twice");
  }
  return run_golden_adamw(f, m->named_parameters(), [&](int64_t s) {
    const Variable logits = m->forward(step_of(src, s), step_of(src_lengths, s).data, step_of(tgt, s),
                                       step_of(tgt_lengths, s).data);
    return cross_entropy(logits, step_of(targets, s));  // the padded targets hold the default ignore_index
  });
}

}  // namespace ag::parity
