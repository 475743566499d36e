// The command line of tools/train_sequence: its task, model and batch flags on top of the
// flags and config-file handling every training program shares (training_program.h); apart
// from main() so that the tests can feed it bad flags and config files.
//
//   TrainSequenceArgs args = parse_training_args<TrainSequenceArgs>({"--task", "sort", "--steps=3000"});
//   TrainSequenceArgs args = parse_training_args<TrainSequenceArgs>({"--config", "run.toml", "--lr", "1e-3"});
#pragma once

#include <cstdint>
#include <string>

#include "attograd/models/toy/sequence_model.h"
#include "attograd/models/toy/sequence_tasks.h"
#include "attograd/train/trainer.h"
#include "common/training_program.h"

namespace ag {

struct TrainSequenceArgs : TrainingArgs {
  static constexpr ProgramInfo kInfo{.name = "train_sequence", .holds = "model, task", .outputs = "<task>"};

  SequenceTaskOptions task;     // seed = --seed
  SequenceModelOptions model;   // vocab and max_len follow the task
  int64_t eval_sequences = 512;
  std::string task_name;
  BlockChoices block;

  void declare(Flags& f) {
    f.app().description(
        "Trains a small transformer encoder on a toy sequence task and reports held-out accuracy.\n"
        "The defaults train `reverse` (length 16, vocab 16) to 99% exact-sequence accuracy in seconds.");
    using TL = SequenceTaskLimits;
    task_name = sequence_task_name(task.kind);
    f.group("task", true);
    f.choice("--task", task_name, "what to learn", {"copy", "reverse", "sort", "shift"});
    f.integer("--shift-k", task.shift, 1, std::numeric_limits<int32_t>::max(), "rotation of the shift task, 1 <= K < length");
    f.integer("--vocab", task.vocab_size, 2, TL::vocab_size, "tokens 0..V-1");
    f.integer("--length", task.seq_len, 1, std::min(TL::seq_len, SequenceModelLimits::max_len), "sequence length");
    f.group("model", true);
    declare_block_flags(f, model, block);
    f.integer("--layers", model.n_layers, 1, SequenceModelLimits::n_layers, "encoder blocks");
    f.group("optimisation", true);
    f.integer("--batch", task.batch_size, 1, TL::batch_size, "sequences per step");
    f.group("evaluation and output", false);
    f.integer("--eval-sequences", eval_sequences, 1, TrainerLimits::eval_sequences, "held-out sequences per evaluation");
  }

  void finish(const CommandLine& line) {
    task.kind = line.choice("--task", parse_sequence_task_kind, task_name);
    finish_block_flags(line, model, block);
    if (line.resuming) return;
    if (task.kind != SequenceTaskKind::shift && line.typed("--shift-k")) throw UsageError("--shift-k needs --task shift");
    if (task.kind == SequenceTaskKind::shift && task.shift >= task.seq_len) {
      throw UsageError("--shift-k: " + std::to_string(task.shift) + " must be below --length " +
                       std::to_string(task.seq_len));
    }
    task.seed = seed;
    model.vocab = task.vocab_size;
    model.max_len = task.seq_len;
    SequenceTask check_task(task);
    validate(model);
  }
};

}  // namespace ag
