// Seq2SeqTrainer's side of checkpoints: the metadata it writes besides parameters and optimizer
// state, and resuming from it.
#include <stdexcept>

#include "attograd/core/rng.h"
#include "attograd/train/checkpoint.h"
#include "attograd/train/checkpoint_metadata.h"
#include "attograd/train/gpt_trainer.h"
#include "attograd/train/model_options.h"
#include "attograd/train/seq2seq_trainer.h"

namespace ag {

namespace {

// Refuses a checkpoint of another kind before any of its entries is read as a Seq2Seq's.
void require_seq2seq(const std::string& path, const CheckpointInfo& info) {
  const std::string kind = checkpoint_model_kind(info);
  if (kind == kSeq2SeqModelKind) return;
  const std::string holds = kind == "sequence" ? "a sequence model (written by train_sequence)"
                            : kind == kGPTModelKind ? "a GPT language model (written by train_gpt)"
                                                    : "a model of kind '" + kind + "'";
  throw std::runtime_error("checkpoint '" + path + "' holds " + holds +
                           ", not an encoder-decoder (\"model_kind\": \"seq2seq\", written by train_seq2seq)");
}

Seq2SeqCheckpointConfig read_config(const std::string& path, const CheckpointInfo& info) {
  require_seq2seq(path, info);
  Seq2SeqCheckpointConfig c;
  c.model = parse_entry(path, info, "seq2seq", seq2seq_options_from_json);
  c.task = parse_entry(path, info, "seq2seq_task", seq2seq_task_options_from_json);
  c.trainer = parse_entry(path, info, "trainer", [](const std::string& s) { return trainer_options_from_json(s); });
  const LoopState loop = parse_entry(path, info, "loop", loop_state_from_json);
  if (static_cast<uint64_t>(loop.step) != info.data_position || loop.step > c.trainer.steps) {
    throw std::runtime_error("checkpoint '" + path + "': loop step " + std::to_string(loop.step) +
                             " disagrees with data_position " + std::to_string(info.data_position) +
                             " or the step budget " + std::to_string(c.trainer.steps));
  }
  c.step = loop.step;
  return c;
}

}  // namespace

std::map<std::string, std::string> Seq2SeqTrainer::metadata() const {
  LoopState loop;
  loop.step = step_;
  loop.window_loss_sum = window_loss_sum_;
  loop.window_steps = window_steps_;
  loop.elapsed_s = clock_.total_s();
  loop.first_loss = guard_.first_loss;
  return {{"model_kind", kSeq2SeqModelKind},
          {"seq2seq", seq2seq_options_to_json(model_.options())},
          {"seq2seq_task", seq2seq_task_options_to_json(task_.options())},
          {"trainer", trainer_options_to_json(options_)},
          {"loop", loop_state_to_json(loop)}};
}

void Seq2SeqTrainer::save_checkpoint(const std::string& path) const {
  ::ag::save_checkpoint(path, params_, *optimizer_, metadata(), default_generator().state(), static_cast<uint64_t>(step_));
}

Seq2SeqCheckpointConfig read_seq2seq_checkpoint_config(const std::string& path) {
  return read_config(path, read_checkpoint_info(path));
}

void Seq2SeqTrainer::resume(const std::string& path) {
  // Everything is checked before anything changes.
  const CheckpointInfo info = read_checkpoint_info(path);
  const Seq2SeqCheckpointConfig c = read_config(path, info);
  const auto require_same = [&](const char* what, const std::string& file, const std::string& ours) {
    if (file != ours) {
      throw std::runtime_error("checkpoint '" + path + "': its " + what + " " + file + " differs from this run's " + ours);
    }
  };
  require_same("model", seq2seq_options_to_json(c.model), seq2seq_options_to_json(model_.options()));
  require_same("task", seq2seq_task_options_to_json(c.task), seq2seq_task_options_to_json(task_.options()));
  require_same("trainer configuration", trainer_options_to_json(c.trainer), trainer_options_to_json(options_));
  const LoopState loop = parse_entry(path, info, "loop", loop_state_from_json);

  const CheckpointInfo loaded = load_checkpoint(path, params_, *optimizer_);
  default_generator().set_state(loaded.rng_state);
  step_ = loop.step;
  window_loss_sum_ = loop.window_loss_sum;
  window_steps_ = loop.window_steps;
  clock_.set_earlier_s(loop.elapsed_s);
  guard_.first_loss = loop.first_loss;
  guard_.last_saved_step = step_;
  resumed_ = true;
}

}  // namespace ag
