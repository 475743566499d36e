// Fine-tuning any model: the weights a run starts from (init_from), the parameters it leaves
// alone (freeze), and the LoRA adapters it trains instead (layers/lora.h). What a run did is
// recorded in its checkpoints' "finetune" entry, so that a resume, generate and evaluate rebuild
// the very model that trained:
//
//   "finetune": {"init_from": {"path": "/abs/base.safetensors", "bytes": 1234, "crc32c": 567},
//                "freeze": ["embed", "pos"],
//                "lora": {"rank": 8, "alpha": 8, "targets": ["w_q", "w_k", "w_v", "w_o"]},
//                "adapter_only": true}
//
// With LoRA every parameter but the adapters' is frozen (peft's default): the base stays
// exactly as it was loaded. Frozen parameters get no gradient and no optimizer state (the
// Trainer hands the optimizer only the parameters that require grad). With adapter_only a
// checkpoint holds just the trainable parameters and their optimizer state; the base is read
// again from init_from when the checkpoint is loaded, after its size and CRC-32C are found equal
// to the recorded ones, so that an adapter never lands on another base.
//
// What is the family's own is how a base is read into a model (a callback here): each family's
// finetune header (models/gpt/finetune.h, models/llama/llama_finetune.h) wraps these functions
// with its reader, its default LoRA targets and its checks of the options against a shape.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attograd/layers/lora.h"
#include "attograd/layers/module.h"
#include "attograd/train/io/checkpoint.h"

namespace ag {

struct FineTuneOptions {
  std::string init_from{};            // the base's weights (a file or a directory); empty: none
  std::vector<std::string> freeze{};  // patterns over parameter names (parameter_matches)
  int64_t lora_rank = 0;              // 0: no adapters
  double lora_alpha = 0;              // 0: the rank (a scaling of 1)
  std::vector<std::string> lora_targets{};  // empty: the family's default (its attention projections)
  bool adapter_only = false;          // checkpoints hold only the trainable parameters (needs init_from)

  bool active() const { return !init_from.empty() || !freeze.empty() || lora_rank > 0; }
  LoRAOptions lora() const {
    return {.rank = lora_rank, .alpha = lora_alpha > 0 ? lora_alpha : static_cast<double>(lora_rank)};
  }
  // These options with `targets` where they name none.
  FineTuneOptions with_default_targets(const std::vector<std::string>& targets) const {
    FineTuneOptions o = *this;
    if (o.lora_targets.empty()) o.lora_targets = targets;
    return o;
  }
};

// Whether `pattern` names the parameter `name`: a glob over the whole dotted name ('*' any run of
// characters, dots included; '?' one character), or over a leading part of it that ends at a
// dot ("blocks.0" names every parameter of block 0, "embed" names "embed.weight").
bool parameter_matches(const std::string& pattern, const std::string& name);

// Sets requires_grad false on every parameter of `model` that a pattern names. A pattern that
// names none is std::invalid_argument naming it and the parameters there are; nothing is
// frozen then.
void freeze_parameters(Module& model, const std::vector<std::string>& patterns);

// The weights a fine-tuning run started from, as the "finetune" entry records them: a file, or a
// Hugging Face directory, whose config.json, model.safetensors.index.json and *.safetensors
// files (in that order, the shards by name) are counted and checksummed as one.
struct BaseWeights {
  std::string path{};  // absolute
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};
// std::runtime_error naming the file when it cannot be read.
BaseWeights describe_base_weights(const std::string& path);

// std::invalid_argument for options that no model can take: adapter_only without init_from or
// without anything frozen, a negative rank or alpha.
void check_finetune_options(const FineTuneOptions& options);

// Reads the base at `path` into the model (the family's reader); it throws what the reader
// throws.
using LoadBaseWeights = std::function<void(const std::string& path)>;

// A fresh fine-tuning run: loads init_from with `load` (when set, unless `base_loaded` says the
// caller has already done so), freezes, puts the adapters on options.lora_targets (which must
// name some when lora_rank > 0) and returns the "finetune" entry. std::invalid_argument for bad
// options (a pattern that names nothing, a LoRA target that does not exist, a rank that does not
// fit), std::runtime_error for the file.
std::string prepare_finetune_with(Module& model, const FineTuneOptions& options, const LoadBaseWeights& load,
                                  bool base_loaded = false);
// The adapters and frozen parameters alone, on a model whose base weights are in place.
void adapt_for_finetune(Module& model, const FineTuneOptions& options);
// The names' half of a family's validate_finetune: the options, at rank 1, applied to `twin`, a
// narrow model of the family with the real one's names; std::invalid_argument for a pattern or
// a target that names nothing.
void check_finetune_names(Module& twin, const FineTuneOptions& options);

// The options of a checkpoint's "finetune" entry (inactive when it has none); std::runtime_error
// naming the file when the entry is invalid.
FineTuneOptions finetune_options_from(const Checkpoint& checkpoint);
// Rebuilds on `model` (built from the checkpoint's options) what the checkpoint's run did before
// its first step: the adapters and the frozen parameters, and, when the checkpoint holds only the
// trainable parameters, the base's weights read with `load` (checked against the recorded size
// and CRC-32C first: std::runtime_error naming both files otherwise). The checkpoint's own
// tensors are not loaded.
void restore_finetune_with(const Checkpoint& checkpoint, Module& model, const LoadBaseWeights& load);
// Whether the checkpoint holds only the trainable parameters (Trainer: "saved_parameters").
bool holds_trainable_only(const Checkpoint& checkpoint);

}  // namespace ag
