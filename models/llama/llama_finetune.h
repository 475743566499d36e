// Fine-tuning a Llama-family model: what train/finetune.h does for any model, with this family's
// base weights (a Hugging Face directory, or a checkpoint of a Llama-family run of train_gpt), its
// default LoRA targets (q_proj, k_proj, v_proj and o_proj of every layer) and its checks of the
// options against a shape.
//
//   std::unique_ptr<Llama> model = ...;  // built from SmolLM2-135M/config.json
//   job.finetune = prepare_finetune(*model, {.init_from = "SmolLM2-135M/", .lora_rank = 8});
#pragma once

#include <string>
#include <vector>

#include "attograd/models/llama/llama.h"
#include "attograd/train/finetune.h"
#include "attograd/train/io/checkpoint.h"

namespace ag {

// The LoRA targets when the options name none: the attention's four projections of every layer.
std::vector<std::string> llama_lora_default_targets();

// The parameters LoRA with these options adds to a model of this shape (what trains), counted
// from the shape: rank * (in + out) for each projection a target names, in every layer. A target
// naming one layer's projection (a dotted prefix) is counted in every layer: never less.
int64_t llama_lora_parameter_count(const LlamaOptions& model, const FineTuneOptions& options);

// Reads the base at `path` into `model`: a Hugging Face directory of this family whose
// config.json describes `model`'s very options, or a checkpoint of a Llama-family run holding
// this model's options and neither an adapter alone nor a model with adapters. Returns what it
// was ("Hugging Face directory", "attograd checkpoint"); std::runtime_error naming the file
// otherwise. `opened`: the checkpoint already opened by the caller (not read again).
std::string load_initial_weights(const std::string& path, Llama& model, const Checkpoint* opened = nullptr);

// Checks the options against a model of this shape without building it at full size (a Llama
// of the same layers at the smallest width stands in for the names), so that a program can
// refuse them before it writes anything: a pattern or target that names nothing, a rank wider
// than a targeted projection's narrower side, adapter_only without init_from.
void validate_finetune(const LlamaOptions& model, const FineTuneOptions& options);

// train/finetune.h's prepare_finetune_with and restore_finetune_with with load_initial_weights
// as the reader and this family's default targets.
std::string prepare_finetune(Llama& model, const FineTuneOptions& options, bool base_loaded = false);
void restore_finetune(const Checkpoint& checkpoint, Llama& model);

}  // namespace ag
