// GPTTrainer's side of checkpoints: the metadata it writes besides parameters and optimizer
// state, resuming from it, and loading a trained GPT for generation.
#include <cmath>
#include <optional>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/core/rng.h"
#include "attograd/train/checkpoint.h"
#include "attograd/train/checkpoint_metadata.h"
#include "attograd/train/gpt_trainer.h"
#include "attograd/train/json_text.h"
#include "attograd/train/model_options.h"

namespace ag {

namespace {

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
  loop.elapsed_s = clock_.total_s();
  loop.first_loss = guard_.first_loss;
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
  require_same("text (token count and checksum)", metadata_entry(path, info, "data"), data_json_);
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
