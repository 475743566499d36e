#include "attograd/models/gpt/finetune.h"

#include <optional>
#include <stdexcept>

#include "attograd/core/rng.h"
#include "attograd/models/gpt/gpt_load.h"
#include "attograd/models/gpt/gpt_options.h"

namespace ag {

std::vector<std::string> gpt_lora_default_targets() { return {"w_q", "w_k", "w_v", "w_o"}; }

GPTWeightsLayout load_initial_weights(const std::string& path, GPT& model, const Checkpoint* opened) {
  if (opened == nullptr && gpt_weights_layout(path) != GPTWeightsLayout::attograd) return read_gpt_weights(model, path);
  // Our own checkpoints carry the model's options and may carry a fine-tuning run's state.
  std::optional<Checkpoint> own;
  if (opened == nullptr) own.emplace(Checkpoint::open(path));
  const Checkpoint& ck = opened != nullptr ? *opened : *own;
  const GPTOptions file = gpt_options_from(ck);
  if (gpt_options_to_json(file) != gpt_options_to_json(model.options())) {
    throw std::runtime_error("base weights '" + path + "': the file's model " + gpt_options_to_json(file) +
                             " differs from this run's " + gpt_options_to_json(model.options()));
  }
  if (ck.has_entry("finetune") && holds_trainable_only(ck)) {
    throw std::runtime_error("base weights '" + path + "': the file holds only an adapter, not a whole model");
  }
  if (ck.has_entry("finetune") && finetune_options_from(ck).lora_rank > 0) {
    throw std::runtime_error("base weights '" + path + "': the file holds a model with LoRA adapters; " +
                             "load it with load_gpt_checkpoint and merge_lora it first");
  }
  ck.load(model.named_parameters());
  return GPTWeightsLayout::attograd;
}

void validate_finetune(const GPTOptions& m, const FineTuneOptions& given) {
  const FineTuneOptions o = given.with_default_targets(gpt_lora_default_targets());
  check_finetune_options(o);
  if (o.lora_rank > m.d_model) {
    throw std::invalid_argument("finetune: LoRA rank " + std::to_string(o.lora_rank) + " must lie in [1, " +
                                std::to_string(m.d_model) + "]: the projections of this GPT are d_model = " +
                                std::to_string(m.d_model) + " wide on their narrower side");
  }
  GeneratorStateGuard keep_generator;
  GPTOptions names_only = m;
  names_only.vocab = 1;
  names_only.block_size = 1;
  names_only.d_model = m.n_head;  // heads of one: the same modules, the same names
  GPT twin(names_only);
  check_finetune_names(twin, o);
}

std::string prepare_finetune(GPT& model, const FineTuneOptions& o, bool base_loaded) {
  return prepare_finetune_with(
      model, o.with_default_targets(gpt_lora_default_targets()),
      [&](const std::string& path) { load_initial_weights(path, model); }, base_loaded);
}

void restore_finetune(const Checkpoint& ck, GPT& model) {
  restore_finetune_with(ck, model, [&](const std::string& path) { load_initial_weights(path, model); });
}

}  // namespace ag
