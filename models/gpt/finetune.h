// Fine-tuning a GPT: the weights a run starts from (init_from), the parameters it leaves alone
// (freeze), and the LoRA adapters it trains instead (layers/lora.h). What a run did is recorded
// in its checkpoints' "finetune" entry, so that a resume, generate and evaluate rebuild the very
// model that trained:
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
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/layers/lora.h"
#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "attograd/train/io/checkpoint.h"

namespace ag {

struct FineTuneOptions {
  std::string init_from{};            // the base's weights (an attograd GPT checkpoint); empty: none
  std::vector<std::string> freeze{};  // patterns over parameter names (parameter_matches)
  int64_t lora_rank = 0;              // 0: no adapters
  double lora_alpha = 0;              // 0: the rank (a scaling of 1)
  std::vector<std::string> lora_targets{"w_q", "w_k", "w_v", "w_o"};
  bool adapter_only = false;          // checkpoints hold only the trainable parameters (needs init_from)

  bool active() const { return !init_from.empty() || !freeze.empty() || lora_rank > 0; }
  LoRAOptions lora() const {
    return {.rank = lora_rank, .alpha = lora_alpha > 0 ? lora_alpha : static_cast<double>(lora_rank)};
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

// The file a fine-tuning run started from, as the "finetune" entry records it.
struct BaseWeights {
  std::string path{};  // absolute
  uint64_t bytes = 0;
  uint32_t crc32c = 0;  // of the whole file
};
// std::runtime_error naming the file when it cannot be read.
BaseWeights describe_base_weights(const std::string& path);

// A GPT's initial weights from `path`, in any layout models/gpt/gpt_weights.h reads (told from the
// content), and which it was. An attograd checkpoint must hold this model's very options, and
// neither an adapter alone nor a model with adapters; the other layouts are checked tensor by
// tensor against the model (read_gpt_weights). std::runtime_error naming the file otherwise.
// `opened`, when given, is the file already opened as one of our checkpoints (a base that is one
// carries the run's model options and tokenizer, which the caller reads from it first): it is
// not read again.
GPTWeightsLayout load_initial_weights(const std::string& path, GPT& model, const Checkpoint* opened = nullptr);

// Checks the options against a model of `model`'s shape without building it at full size (a
// GPT of the same layers at the smallest width stands in for the names), so that a program can
// refuse them before it writes anything: the same std::invalid_argument as prepare_finetune for
// a pattern or target that names nothing, a rank above d_model (every projection of a GPT is at
// least d_model wide on its narrower side), adapter_only without init_from.
void validate_finetune(const GPTOptions& model, const FineTuneOptions& options);

// A fresh fine-tuning run: loads init_from into `model` (when set, unless `base_loaded` says the
// caller has already done so with load_initial_weights), freezes, puts the adapters in place,
// and returns the "finetune" entry. std::invalid_argument for bad options (a pattern
// that names nothing, a LoRA target that does not exist, a rank that does not fit, adapter_only
// without init_from), std::runtime_error for the file.
std::string prepare_finetune(GPT& model, const FineTuneOptions& options, bool base_loaded = false);

// The options of a checkpoint's "finetune" entry (inactive when it has none); std::runtime_error
// naming the file when the entry is invalid.
FineTuneOptions finetune_options_from(const Checkpoint& checkpoint);
// Rebuilds on `model` (built from the checkpoint's options) what the checkpoint's run did before
// its first step: the adapters and the frozen parameters, and, when the checkpoint holds only the
// trainable parameters, the base's weights (checked against the recorded size and CRC-32C:
// std::runtime_error naming both files otherwise). The checkpoint's own tensors are not loaded.
void restore_finetune(const Checkpoint& checkpoint, GPT& model);
// Whether the checkpoint holds only the trainable parameters (Trainer: "saved_parameters").
bool holds_trainable_only(const Checkpoint& checkpoint);

}  // namespace ag
