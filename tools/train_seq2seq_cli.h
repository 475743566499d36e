// The command line of tools/train_seq2seq: its task, model, batch and decoding flags on top
// of the flags and config-file handling every training program shares (training_program.h).
//
//   TrainSeq2SeqArgs args = parse_training_args<TrainSeq2SeqArgs>({"--task", "addition", "--beam", "4"});
//   TrainSeq2SeqArgs args = parse_training_args<TrainSeq2SeqArgs>({"--config", "runs/addition/config.toml"});
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "attograd/models/seq2seq/seq2seq.h"
#include "attograd/models/seq2seq/seq2seq_tasks.h"
#include "attograd/train/trainer.h"
#include "common/training_program.h"

namespace ag {

struct TrainSeq2SeqArgs : TrainingArgs {
  static constexpr ProgramInfo kInfo{.name = "train_seq2seq", .holds = "model, task", .outputs = "<task>"};

  // reverse-var over 10 symbols, 1 to 8 long; addition takes 1 to 8 digits per operand.
  Seq2SeqTaskOptions task{.kind = Seq2SeqTaskKind::reverse_var, .symbols = 10, .min_len = 1, .max_len = 8,
                          .batch_size = 64};
  // The original Transformer's shape, small: post-norm, sinusoidal positions, ReLU.
  // src_vocab, tgt_vocab and max_len follow the task.
  Seq2SeqOptions model{.src_vocab = 0, .tgt_vocab = 0, .max_len = 0, .d_model = 64, .n_head = 4, .d_ff = 256,
                       .n_encoder_layers = 2, .n_decoder_layers = 2, .dropout = 0.0};
  int64_t eval_sequences = 512;
  int64_t beam = 1;              // the final held-out decoding and the examples: 1 is greedy
  double length_penalty = 0.6;   // GNMT's alpha for beam search
  bool json = false;             // end with one JSON line of the results (bench/compare_seq2seq.sh)
  std::string task_name, activation;
  BlockChoices block;
  // The switches whose flags turn a default off.
  bool no_final_norm = false, no_attn_bias = false, no_scale_embeddings = false;

  TrainSeq2SeqArgs() {
    trainer = {.optimizer = OptimizerKind::adam, .lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 100, .steps = 4000,
               .clip_norm = 1.0, .eval_every = 100, .target_seq_acc = 0.99};
  }

  void declare(Flags& f) {
    f.app().description(
        "Trains an encoder-decoder transformer (the original Transformer, small) on a generated task of\n"
        "variable-length sequences and decodes held-out sources greedily or with beam search.\n"
        "The defaults train reverse-var (1 to 8 symbols) to 99% exact held-out outputs.");
    using TL = Seq2SeqTaskLimits;
    task_name = seq2seq_task_name(task.kind);
    activation = activation_name(model.activation);
    f.group("task", true);
    f.choice("--task", task_name, "what to learn", {"addition", "reverse-var", "sort-var", "dedup"});
    f.integer("--symbols", task.symbols, 1, TL::symbols, "distinct symbols (not addition: ten digits)");
    f.integer("--min-len", task.min_len, 1, TL::max_len, "shortest source (addition: digits per operand)");
    f.integer("--max-len", task.max_len, 1, TL::max_len, "longest source (addition: digits per operand, at most 18)");
    f.group("model", true);
    declare_block_flags(f, model, block);
    f.integer("--encoder-layers", model.n_encoder_layers, 1, Seq2SeqLimits::n_layers, "encoder layers");
    f.integer("--decoder-layers", model.n_decoder_layers, 1, Seq2SeqLimits::n_layers, "decoder layers");
    f.choice("--activation", activation, "feed-forward nonlinearity", {"relu", "gelu"});
    f.flag("--share-embeddings", model.share_embeddings, "one token table for source and target");
    f.flag("--tie-head", model.tie_head, "the output head multiplies by the target table");
    f.flag("--input-norm", model.input_norm, "LayerNorm on the embedded input of each stack");
    f.flag("--no-final-norm", no_final_norm, "no LayerNorm after the encoder and decoder stacks");
    f.real("--layer-norm-eps", model.layer_norm_eps, 0.0, 1.0, "epsilon of every LayerNorm (above 0)");
    f.flag("--no-attn-bias", no_attn_bias, "attention projections without bias");
    f.integer("--d-k", model.d_k, 0, Seq2SeqLimits::d_model, "query and key size per head (0: d_model / heads)");
    f.integer("--d-v", model.d_v, 0, Seq2SeqLimits::d_model, "value size per head (0: d_model / heads)");
    f.flag("--no-scale-embeddings", no_scale_embeddings, "embeddings not multiplied by sqrt(d_model)");
    f.flag("--scale-logits", model.scale_logits, "logits multiplied by 1/sqrt(d_model)");
    f.group("optimisation", true);
    f.integer("--batch", task.batch_size, 1, TL::batch_size, "sequences per step");
    f.group("evaluation and output", false);
    f.integer("--eval-sequences", eval_sequences, 1, TrainerLimits::eval_sequences, "held-out sources");
    f.integer("--beam", beam, 1, 64, "beam width of the final held-out decoding and the examples (1: greedy)");
    f.real("--length-penalty", length_penalty, 0.0, 100.0, "beam search's GNMT alpha (0: log-probability alone)");
    f.flag("--json", json, "end with one JSON line of the results");
  }

  void finish(const CommandLine& line) {
    task.kind = line.choice("--task", parse_seq2seq_task_kind, task_name);
    model.activation = line.choice("--activation", parse_activation, activation);
    finish_block_flags(line, model, block);
    model.final_norm = !no_final_norm;
    model.attn_bias = !no_attn_bias;
    model.scale_embeddings = !no_scale_embeddings;
    if (line.resuming) return;
    if (task.kind == Seq2SeqTaskKind::addition && line.typed("--symbols")) {
      throw UsageError("--symbols: the addition task has its own ten digits and '+'");
    }
    if (task.min_len > task.max_len) {
      throw UsageError("--min-len: " + std::to_string(task.min_len) + " is above --max-len " +
                       std::to_string(task.max_len));
    }
    if (task.kind == Seq2SeqTaskKind::addition && task.max_len > Seq2SeqTaskLimits::addition_digits) {
      throw UsageError("--max-len: " + std::to_string(task.max_len) + " digits per operand is more than " +
                       std::to_string(Seq2SeqTaskLimits::addition_digits) + " (the sum must fit in 64 bits)");
    }
    task.seed = seed;
    const Seq2SeqTask checked(task);  // the model's sizes follow the task
    model.src_vocab = model.tgt_vocab = checked.vocab_size();
    model.max_len = std::max(checked.max_source_len(), checked.max_target_len() + 1);
    validate(model);
  }
};

}  // namespace ag
