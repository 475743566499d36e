// The Trainer's side of checkpoints: what it stores besides parameters and optimizer state
// (the model, task and trainer options, and the loop's window and clock), and resuming from it.
#include <cmath>
#include <optional>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/core/rng.h"
#include "attograd/train/checkpoint.h"
#include "attograd/train/json_text.h"
#include "attograd/train/model_options.h"
#include "attograd/train/trainer.h"

namespace ag {

namespace {

const std::string& metadata_entry(const std::string& path, const CheckpointInfo& info, const char* key) {
  const auto it = info.metadata.find(key);
  if (it == info.metadata.end()) {
    throw std::runtime_error("checkpoint '" + path + "': __metadata__ has no '" + key +
                             "' (it was not written by the Trainer)");
  }
  return it->second;
}

// Parses one JSON metadata entry with `parse`, turning its std::invalid_argument into the
// checkpoint's std::runtime_error.
template <typename Parse>
auto parse_entry(const std::string& path, const CheckpointInfo& info, const char* key, Parse parse) {
  const std::string& text = metadata_entry(path, info, key);
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("checkpoint '" + path + "': metadata '" + key + "' is invalid: " + e.what());
  } catch (const JsonError& e) {
    throw std::runtime_error("checkpoint '" + path + "': metadata '" + key + "' is invalid: " + e.what());
  }
}

// The metrics window and clock of the run, saved as the "loop" entry.
struct LoopState {
  int64_t step = 0;
  double window_loss_sum = 0;
  int64_t window_steps = 0;
  double elapsed_s = 0;
  double first_loss = 0;  // the run's first training loss, the reference for divergence; 0 = none yet
};

std::string loop_state_to_json(const LoopState& s) {
  return OrderedJson({{"step", s.step},
                      {"window_loss_sum", s.window_loss_sum},
                      {"window_steps", s.window_steps},
                      {"elapsed_s", s.elapsed_s},
                      {"first_loss", s.first_loss}})
      .dump();
}

LoopState loop_state_from_json(const std::string& text) {
  // first_loss is absent from checkpoints written before it was saved.
  const Json j = parse_options_object(text, {"step", "window_loss_sum", "window_steps", "elapsed_s", "first_loss"}, "");
  const auto field = [&](const char* key) -> const Json& {
    const auto it = j.find(key);
    if (it == j.end()) throw std::invalid_argument(std::string("missing \"") + key + "\" in " + text);
    return *it;
  };
  const auto integer = [&](const char* key) {
    const std::optional<int64_t> v = json_int64(field(key));
    if (!v) throw std::invalid_argument(std::string("\"") + key + "\" must be an integer, got " + field(key).dump());
    return *v;
  };
  const auto real = [&](const char* key) {
    if (!field(key).is_number()) {
      throw std::invalid_argument(std::string("\"") + key + "\" must be a number, got " + field(key).dump());
    }
    return field(key).get<double>();
  };
  LoopState s;
  s.step = integer("step");
  s.window_loss_sum = real("window_loss_sum");
  s.window_steps = integer("window_steps");
  s.elapsed_s = real("elapsed_s");
  if (j.contains("first_loss")) s.first_loss = real("first_loss");
  if (!(s.first_loss >= 0 && std::isfinite(s.first_loss))) {
    throw std::invalid_argument("first_loss " + format_number(s.first_loss) + " is not a finite loss");
  }
  if (s.step < 0 || s.step > TrainerLimits::steps || s.window_steps < 0 || s.window_steps > s.step) {
    throw std::invalid_argument("step " + std::to_string(s.step) + " and window_steps " +
                                std::to_string(s.window_steps) + " are inconsistent (need 0 <= window_steps <= step <= " +
                                std::to_string(TrainerLimits::steps) + ")");
  }
  if (!(s.elapsed_s >= 0 && s.elapsed_s < 1e10)) {
    throw std::invalid_argument("elapsed_s " + format_number(s.elapsed_s) + " is not a duration in seconds");
  }
  if (!(s.window_loss_sum >= 0 && std::isfinite(s.window_loss_sum))) {
    throw std::invalid_argument("window_loss_sum " + format_number(s.window_loss_sum) + " is not a finite sum of losses");
  }
  return s;
}

// The loop's step against the run's own budget and the data position: a checkpoint cannot be
// further along than its budget allows.
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
  loop.elapsed_s = elapsed_s();
  loop.first_loss = first_loss_;
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
  elapsed_before_s_ = loop.elapsed_s;
  first_loss_ = loop.first_loss;
  last_saved_step_ = step_;
  resumed_ = true;
}

}  // namespace ag
