// The Trainer's side of checkpoints: what it stores besides parameters and optimizer state
// (the model, task and trainer options, and the loop's window and clock), and resuming from it.
#include <cmath>
#include <optional>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/core/rng.h"
#include "attograd/train/checkpoint.h"
#include "attograd/train/checkpoint_metadata.h"
#include "attograd/train/json_text.h"
#include "attograd/train/model_options.h"
#include "attograd/train/trainer.h"

namespace ag {

namespace {

void check_loop_step(const std::string& path, const LoopState& loop, const TrainerOptions& trainer,
                     const CheckpointInfo& info) {
  if (static_cast<uint64_t>(loop.step) != info.data_position) {
    throw std::runtime_error("checkpoint '" + path + "': loop step " + std::to_string(loop.step) +
                             " differs from data_position " + std::to_string(info.data_position));
  }
  if (loop.step > trainer.steps) {
    throw std::runtime_error("checkpoint '" + path + "': loop step " + std::to_string(loop.step) +
                             " is past the run's step budget of " + std::to_string(trainer.steps));
  }
}

}  // namespace

std::map<std::string, std::string> Trainer::metadata() const {
  LoopState loop;
  loop.step = step_;
  loop.window_loss_sum = window_loss_sum_;
  loop.window_steps = window_steps_;
  loop.elapsed_s = clock_.total_s();
  loop.first_loss = guard_.first_loss;
  return {{"model", sequence_model_options_to_json(model_.options())},
          {"task", task_options_to_json(task_.options())},
          {"trainer", trainer_options_to_json(options_)},
          {"loop", loop_state_to_json(loop)}};
}

void Trainer::save_checkpoint(const std::string& path) const {
  ::ag::save_checkpoint(path, params_, *optimizer_, metadata(), default_generator().state(), static_cast<uint64_t>(step_));
}

CheckpointConfig read_checkpoint_config(const std::string& path) {
  const CheckpointInfo info = read_checkpoint_info(path);
  CheckpointConfig c;
  c.model = parse_entry(path, info, "model", sequence_model_options_from_json);
  c.task = parse_entry(path, info, "task", task_options_from_json);
  c.trainer = parse_entry(path, info, "trainer", [](const std::string& s) { return trainer_options_from_json(s); });
  const LoopState loop = parse_entry(path, info, "loop", loop_state_from_json);
  check_loop_step(path, loop, c.trainer, info);
  c.step = loop.step;
  return c;
}

void Trainer::resume(const std::string& path) {
  // Check the whole configuration before anything changes.
  const CheckpointInfo info = read_checkpoint_info(path);
  const auto require_same = [&](const char* key, const std::string& file_json, const std::string& ours) {
    if (file_json != ours) {
      throw std::runtime_error("checkpoint '" + path + "': its " + key + " configuration " + file_json +
                               " differs from this trainer's " + ours);
    }
  };
  require_same("model",
               sequence_model_options_to_json(parse_entry(path, info, "model", sequence_model_options_from_json)),
               sequence_model_options_to_json(model_.options()));
  require_same("task", task_options_to_json(parse_entry(path, info, "task", task_options_from_json)),
               task_options_to_json(task_.options()));
  require_same("trainer",
               trainer_options_to_json(parse_entry(path, info, "trainer",
                                                   [](const std::string& s) { return trainer_options_from_json(s); })),
               trainer_options_to_json(options_));
  const LoopState loop = parse_entry(path, info, "loop", loop_state_from_json);
  check_loop_step(path, loop, options_, info);

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
