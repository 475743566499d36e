// The Trainer's checkpoints: what a checkpoint says about its model kind and the run that wrote
// it, the metadata the loop saves, and resume (train/trainer.h describes what they hold).
#include <stdexcept>
#include <string>

#include "attograd/core/rng.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/trainer.h"

namespace ag {

namespace {

// The loop's step against the data position and the run's own budget: a checkpoint cannot be
// further along than its budget allows.
LoopState checked_loop_state(const Checkpoint& ck, const TrainerOptions& trainer) {
  const LoopState loop = parse_entry(ck, "loop", loop_state_from_json);
  if (static_cast<uint64_t>(loop.step) != ck.info().data_position || loop.step > trainer.steps) {
    throw std::runtime_error("checkpoint '" + ck.path() + "': loop step " + std::to_string(loop.step) +
                             " disagrees with data_position " + std::to_string(ck.info().data_position) +
                             " or the step budget " + std::to_string(trainer.steps));
  }
  return loop;
}

// The program that writes each kind, for messages about a checkpoint of the wrong kind.
std::string written_by(const std::string& kind) {
  if (kind == "sequence") return "a sequence tagger (written by train_sequence)";
  if (kind == "gpt") return "a GPT language model (written by train_gpt)";
  if (kind == "seq2seq") return "an encoder-decoder (written by train_seq2seq)";
  if (kind == "llama") return "a Llama-family language model (written by train_gpt --preset llama-tiny)";
  return "a model of kind '" + kind + "'";
}

}  // namespace

std::string checkpoint_model_kind(const CheckpointInfo& info) {
  const auto it = info.metadata.find("model_kind");
  if (it != info.metadata.end()) return it->second;
  // The toy tagger wrote its checkpoints before there was a marker; its "task" entry says it.
  if (info.metadata.count("task") != 0 && info.metadata.count("model") != 0) return "sequence";
  return "unknown";
}

const Checkpoint& require_model_kind(const Checkpoint& ck, const std::string& kind) {
  const std::string found = checkpoint_model_kind(ck.info());
  if (found == kind) return ck;
  const std::string holds = found == "unknown" ? "no model kind marker (\"model_kind\")" : written_by(found);
  throw std::runtime_error("checkpoint '" + ck.path() + "' holds " + holds + ", not " + written_by(kind));
}

TrainerOptions resumed_trainer_options(const Checkpoint& ck, const TrainerOptions& observing) {
  TrainerOptions o =
      parse_entry(ck, "trainer", [&](const std::string& s) { return trainer_options_from_json(s, observing); });
  checked_loop_state(ck, o);
  return o;
}

int64_t checkpoint_step(const Checkpoint& ck) {
  const TrainerOptions o = parse_entry(ck, "trainer", [](const std::string& s) { return trainer_options_from_json(s); });
  return checked_loop_state(ck, o).step;
}

std::map<std::string, std::string> Trainer::metadata() const {
  LoopState loop;
  loop.step = step_;
  loop.window_loss_sum = window_loss_sum_;
  loop.window_steps = window_steps_;
  loop.elapsed_s = clock_.total_s();
  loop.first_loss = guard_.first_loss;
  std::map<std::string, std::string> m = job_.metadata();
  m["model_kind"] = job_.kind();
  m["trainer"] = trainer_options_to_json(options_);
  m["loop"] = loop_state_to_json(loop);
  if (outputs_.save_trainable_only) m["saved_parameters"] = "trainable";
  return m;
}

void Trainer::save_checkpoint(const std::string& path) const {
  ::ag::save_checkpoint(path, outputs_.save_trainable_only ? trainable_ : params_, *optimizer_, metadata(),
                        default_generator().state(), static_cast<uint64_t>(step_));
}

void Trainer::resume(const Checkpoint& ck) {
  // Everything is checked before anything changes.
  require_model_kind(ck, job_.kind());
  const auto require_same = [&](const std::string& what, const std::string& file, const std::string& ours) {
    if (file != ours) {
      throw std::runtime_error("checkpoint '" + ck.path() + "': its " + what + " " + file + " differs from this run's " +
                               ours);
    }
  };
  for (const auto& [key, ours] : job_.metadata()) {
    if (!ck.has_entry(key)) {
      throw std::runtime_error("checkpoint '" + ck.path() + "' has no '" + key + "' entry: it was written before " +
                               "the one training loop, and its run cannot be continued (its parameters still load: " +
                               "generate reads it, load_checkpoint too)");
    }
    require_same("'" + key + "' entry", ck.entry(key), ours);
  }
  TrainerOptions file_options =
      parse_entry(ck, "trainer", [&](const std::string& s) { return trainer_options_from_json(s, options_); });
  // A run may go on past its budget (train/trainer.h): a larger step count is the one difference
  // allowed, and its schedule then ends at the new last step.
  if (options_.steps > file_options.steps) file_options.steps = options_.steps;
  require_same("trainer configuration", trainer_options_to_json(file_options), trainer_options_to_json(options_));
  const LoopState loop = checked_loop_state(ck, options_);  // the loop entry, parsed and checked once

  const bool trainable_only = ck.has_entry("saved_parameters") && ck.entry("saved_parameters") == "trainable";
  ck.load(trainable_only ? trainable_ : params_, *optimizer_);
  default_generator().set_state(ck.info().rng_state);
  step_ = loop.step;
  window_loss_sum_ = loop.window_loss_sum;
  window_steps_ = loop.window_steps;
  clock_.set_earlier_s(loop.elapsed_s);
  guard_.first_loss = loop.first_loss;
  guard_.last_saved_step = step_;
  resumed_ = true;
}

}  // namespace ag
