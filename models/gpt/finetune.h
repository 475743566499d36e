// Fine-tuning a GPT: what train/finetune.h does for any model, with the GPT's reader of base
// weights (every layout models/gpt/gpt_weights.h knows), its default LoRA targets (the four
// attention projections of every block) and its checks of the options against a shape.
//
//   options.finetune = prepare_finetune(model, {.init_from = "base.safetensors", .lora_rank = 8});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "attograd/train/finetune.h"
#include "attograd/train/io/checkpoint.h"

namespace ag {

// The GPT's LoRA targets when the options name none: w_q, w_k, w_v and w_o of every block.
std::vector<std::string> gpt_lora_default_targets();

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

// train/finetune.h's prepare_finetune_with and restore_finetune_with with load_initial_weights
// as the reader and the GPT's default targets.
std::string prepare_finetune(GPT& model, const FineTuneOptions& options, bool base_loaded = false);
void restore_finetune(const Checkpoint& checkpoint, GPT& model);

}  // namespace ag
