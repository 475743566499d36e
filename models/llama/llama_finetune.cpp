#include "attograd/models/llama/llama_finetune.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "attograd/core/rng.h"
#include "attograd/core/skip_init.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/models/llama/llama_load.h"

namespace ag {

std::vector<std::string> llama_lora_default_targets() { return {"q_proj", "k_proj", "v_proj", "o_proj"}; }

namespace {

// The two sides of the Linear a LoRA target names, told by the last part of its name, and how
// many the model has (one per layer); {0, 0, 0} for a name of no projection (the head is held by
// the model itself and takes no adapter: apply_lora says so).
struct Projection {
  int64_t in = 0, out = 0, count = 0;
};
Projection projection_of(const LlamaOptions& m, const std::string& target) {
  const std::string last = target.substr(target.rfind('.') == std::string::npos ? 0 : target.rfind('.') + 1);
  const int64_t q = m.n_head * m.head_dim, kv = m.n_kv_head * m.head_dim, layers = m.n_layers;
  if (last == "q_proj") return {m.d_model, q, layers};
  if (last == "k_proj" || last == "v_proj") return {m.d_model, kv, layers};
  if (last == "o_proj") return {q, m.d_model, layers};
  if (last == "gate_proj" || last == "up_proj") return {m.d_model, m.d_hidden, layers};
  if (last == "down_proj") return {m.d_hidden, m.d_model, layers};
  return {};
}

}  // namespace

int64_t llama_lora_parameter_count(const LlamaOptions& given, const FineTuneOptions& f) {
  if (f.lora_rank == 0) return 0;
  const LlamaOptions m = resolved(given);
  int64_t total = 0;
  for (const std::string& target : f.with_default_targets(llama_lora_default_targets()).lora_targets) {
    const Projection p = projection_of(m, target);
    total += p.count * f.lora_rank * (p.in + p.out);
  }
  return total;
}

std::string load_initial_weights(const std::string& path, Llama& model, const Checkpoint* opened) {
  const std::string ours = llama_hf_config_json(model.options());
  if (opened == nullptr && is_llama_hf_directory(path)) {
    const std::string config = (std::filesystem::path(path) / "config.json").string();
    const std::string file = llama_hf_config_json(llama_options_from_hf_config(config));
    if (file != ours) {
      throw std::runtime_error("base weights '" + path + "': its config.json describes " + file +
                               ", not this run's model " + ours);
    }
    read_llama_hf(model, path);
    return "Hugging Face directory";
  }
  if (opened == nullptr && !is_llama_checkpoint(path)) {
    throw std::runtime_error("base weights '" + path + "': neither a Hugging Face directory of the Llama family " +
                             "(config.json of LlamaForCausalLM, Qwen2, Qwen3 or Mistral) nor a checkpoint of a " +
                             "Llama-family run of train_gpt");
  }
  std::optional<Checkpoint> own;
  if (opened == nullptr) own.emplace(Checkpoint::open(path));
  const Checkpoint& ck = opened != nullptr ? *opened : *own;
  const std::string file = llama_hf_config_json(llama_options_from(ck));
  if (file != ours) {
    throw std::runtime_error("base weights '" + path + "': the file's model " + file + " differs from this run's " + ours);
  }
  if (ck.has_entry("finetune") && holds_trainable_only(ck)) {
    throw std::runtime_error("base weights '" + path + "': the file holds only an adapter, not a whole model");
  }
  if (ck.has_entry("finetune") && finetune_options_from(ck).lora_rank > 0) {
    throw std::runtime_error("base weights '" + path + "': the file holds a model with LoRA adapters; export it " +
                             "with export_gpt --format hf (which merges them) and start from that directory");
  }
  ck.load(model.named_parameters());
  return "attograd checkpoint";
}

void validate_finetune(const LlamaOptions& given, const FineTuneOptions& f) {
  const FineTuneOptions o = f.with_default_targets(llama_lora_default_targets());
  check_finetune_options(o);
  const LlamaOptions m = resolved(given);
  if (o.lora_rank > 0) {
    // Each target's narrower side.
    for (const std::string& target : o.lora_targets) {
      const Projection p = projection_of(m, target);
      const int64_t narrow = std::min(p.in, p.out);
      if (narrow > 0 && o.lora_rank > narrow) {
        throw std::invalid_argument("finetune: LoRA rank " + std::to_string(o.lora_rank) + " must lie in [1, " +
                                    std::to_string(narrow) + "]: '" + target + "' of this model is " +
                                    std::to_string(narrow) + " wide on its narrower side");
      }
    }
  }
  GeneratorStateGuard keep_generator;
  const SkipInitGuard no_init;
  LlamaOptions names_only = m;
  names_only.vocab = 1;
  names_only.max_positions = 1;
  names_only.head_dim = 2;
  names_only.d_model = 2;
  names_only.d_hidden = 1;
  names_only.rope_scaling = {};
  Llama twin(names_only);
  check_finetune_names(twin, o);
}

std::string prepare_finetune(Llama& model, const FineTuneOptions& o, bool base_loaded) {
  return prepare_finetune_with(
      model, o.with_default_targets(llama_lora_default_targets()),
      [&](const std::string& path) { load_initial_weights(path, model); }, base_loaded);
}

void restore_finetune(const Checkpoint& ck, Llama& model) {
  restore_finetune_with(ck, model, [&](const std::string& path) { load_initial_weights(path, model); });
}

}  // namespace ag
