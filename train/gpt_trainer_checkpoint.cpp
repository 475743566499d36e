// GPTTrainer's side of checkpoints: the metadata it writes besides parameters and optimizer
// state, resuming from it, and loading a trained GPT for generation.
#include <cmath>
#include <optional>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/core/rng.h"
#include "attograd/train/checkpoint.h"
#include "attograd/train/gpt_trainer.h"
#include "attograd/train/json_text.h"
#include "attograd/train/model_options.h"

namespace ag {

namespace {

// The metrics window and clock of the run, saved as "loop".
struct LoopState {
  int64_t step = 0;
  double window_loss_sum = 0;
  int64_t window_steps = 0;
  double elapsed_s = 0;
  double first_loss = 0;  // the reference for divergence; 0 before the first update
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
  s.first_loss = real("first_loss");
  if (s.step < 0 || s.step > TrainerLimits::steps || s.window_steps < 0 || s.window_steps > s.step) {
    throw std::invalid_argument("step " + std::to_string(s.step) + " and window_steps " +
                                std::to_string(s.window_steps) + " are inconsistent");
  }
  if (!(s.elapsed_s >= 0 && s.elapsed_s < 1e10)) {
    throw std::invalid_argument("elapsed_s " + format_number(s.elapsed_s) + " is not a duration in seconds");
  }
  if (!(s.window_loss_sum >= 0 && std::isfinite(s.window_loss_sum)) ||
      !(s.first_loss >= 0 && std::isfinite(s.first_loss))) {
    throw std::invalid_argument("window_loss_sum " + format_number(s.window_loss_sum) + " or first_loss " +
                                format_number(s.first_loss) + " is not a finite loss");
  }
  return s;
}

const std::string& entry(const std::string& path, const CheckpointInfo& info, const char* key) {
  const auto it = info.metadata.find(key);
  if (it == info.metadata.end()) {
    throw std::runtime_error("checkpoint '" + path + "': __metadata__ has no '" + key + "'");
  }
  return it->second;
}

// One metadata entry through `parse`, its std::invalid_argument (or JsonError) turned into the
// checkpoint's std::runtime_error.
template <typename Parse>
auto parse_entry(const std::string& path, const CheckpointInfo& info, const char* key, Parse parse) {
  const std::string& text = entry(path, info, key);
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("checkpoint '" + path + "': metadata '" + key + "' is invalid: " + e.what());
  } catch (const JsonError& e) {
    throw std::runtime_error("checkpoint '" + path + "': metadata '" + key + "' is invalid: " + e.what());
  }
}

// Refuses a checkpoint of another kind before any of its entries is read as a GPT's.
void require_gpt(const std::string& path, const CheckpointInfo& info) {
  const std::string kind = checkpoint_model_kind(info);
  if (kind == kGPTModelKind) return;
  if (kind == "sequence") {
    throw std::runtime_error("checkpoint '" + path +
                             "' holds a sequence model (written by train_sequence), not a GPT language model");
  }
  const auto it = info.metadata.find("model_kind");
  throw std::runtime_error("checkpoint '" + path + "' holds " +
                           (it == info.metadata.end() ? std::string("no model kind marker (\"model_kind\")")
                                                      : "a model of kind '" + it->second + "'") +
                           ", not a GPT language model (\"model_kind\": \"gpt\")");
}

GPTCheckpointConfig read_config(const std::string& path, const CheckpointInfo& info) {
  require_gpt(path, info);
  GPTCheckpointConfig c;
  c.model = parse_entry(path, info, "gpt", gpt_options_from_json);
  c.tokenizer = parse_entry(path, info, "tokenizer", Tokenizer::from_json);
  c.trainer = parse_entry(path, info, "gpt_trainer", [](const std::string& s) { return gpt_trainer_options_from_json(s); });
  const LoopState loop = parse_entry(path, info, "loop", loop_state_from_json);
  if (static_cast<uint64_t>(loop.step) != info.data_position || loop.step > c.trainer.steps) {
    throw std::runtime_error("checkpoint '" + path + "': loop step " + std::to_string(loop.step) +
                             " disagrees with data_position " + std::to_string(info.data_position) +
                             " or the step budget " + std::to_string(c.trainer.steps));
  }
  if (c.model.vocab != c.tokenizer.vocab_size()) {
    throw std::runtime_error("checkpoint '" + path + "': the model's vocab " + std::to_string(c.model.vocab) +
                             " differs from its tokenizer's " + std::to_string(c.tokenizer.vocab_size()));
  }
  c.step = loop.step;
  return c;
}

}  // namespace

std::string checkpoint_model_kind(const CheckpointInfo& info) {
  const auto it = info.metadata.find("model_kind");
  if (it != info.metadata.end()) return it->second;
  // The toy Trainer wrote its checkpoints before there was a marker; its "task" entry says it.
  if (info.metadata.count("task") != 0 && info.metadata.count("model") != 0) return "sequence";
  return "unknown";
}

std::map<std::string, std::string> GPTTrainer::metadata() const {
  LoopState loop;
  loop.step = step_;
  loop.window_loss_sum = window_loss_sum_;
  loop.window_steps = window_steps_;
  loop.elapsed_s = elapsed_s();
  loop.first_loss = first_loss_;
  return {{"model_kind", kGPTModelKind},
          {"gpt", gpt_options_to_json(model_.options())},
          {"tokenizer", tokenizer_.to_json()},
          {"gpt_trainer", gpt_trainer_options_to_json(options_)},
          {"data", data_json_},
          {"loop", loop_state_to_json(loop)}};
}

void GPTTrainer::save_checkpoint(const std::string& path) const {
  ::ag::save_checkpoint(path, params_, *optimizer_, metadata(), default_generator().state(), static_cast<uint64_t>(step_));
}

GPTCheckpointConfig read_gpt_checkpoint_config(const std::string& path) {
  return read_config(path, read_checkpoint_info(path));
}

void GPTTrainer::resume(const std::string& path) {
  // Everything is checked before anything changes.
  const CheckpointInfo info = read_checkpoint_info(path);
  const GPTCheckpointConfig c = read_config(path, info);
  const auto require_same = [&](const char* what, const std::string& file, const std::string& ours) {
    if (file != ours) {
      throw std::runtime_error("checkpoint '" + path + "': its " + what + " " + file + " differs from this run's " + ours);
    }
  };
  require_same("model", gpt_options_to_json(c.model), gpt_options_to_json(model_.options()));
  require_same("tokenizer", c.tokenizer.to_json(), tokenizer_.to_json());
  require_same("trainer configuration", gpt_trainer_options_to_json(c.trainer), gpt_trainer_options_to_json(options_));
  require_same("text (token count and checksum)", entry(path, info, "data"), data_json_);
  const LoopState loop = parse_entry(path, info, "loop", loop_state_from_json);

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

LoadedGPT load_gpt_checkpoint(const std::string& path) {
  const CheckpointInfo info = read_checkpoint_info(path);
  const GPTCheckpointConfig c = read_config(path, info);
  LoadedGPT out;
  {
    // Building the model draws its (soon overwritten) initial weights from the default
    // generator; the caller's stream is left where it was.
    GeneratorStateGuard keep_generator;
    out.model = std::make_unique<GPT>(c.model);
  }
  // The tied head reads embed.weight, the one tensor the file holds for both uses.
  load_checkpoint(path, out.model->named_parameters());
  out.model->eval();
  out.tokenizer = c.tokenizer;
  out.step = c.step;
  return out;
}

}  // namespace ag
