// A Llama-family model for inference from a training checkpoint (train_gpt --preset llama-tiny,
// model_kind "llama"), as models/gpt/gpt_load.h loads a GPT's: the "model" entry is the model's
// config.json, the "tokenizer" entry the run's tokenizer. Hugging Face directories load through
// models/llama/llama_hf.h instead.
//
//   LoadedLlama l = load_llama_checkpoint("runs/train_gpt/fortunes/latest/ckpt.safetensors");
//   l.model->generate(l.tokenizer.encode("The "), options);
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "attograd/models/llama/llama.h"
#include "attograd/text/tokenizer.h"
#include "attograd/train/finetune.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/memory.h"

namespace ag {

struct LoadedLlama {
  std::unique_ptr<Llama> model;  // in eval mode
  Tokenizer tokenizer;
  int64_t step = 0;  // the updates the run had made
};

// The model entry's options and the tokenizer entry, checked against each other (the same
// vocabulary) and the memory checked before anything is built. std::runtime_error naming the
// file when the checkpoint is not a Llama-family one or an entry is missing or invalid.
LlamaOptions llama_options_from(const Checkpoint& checkpoint);
Tokenizer llama_tokenizer_from(const Checkpoint& checkpoint);
LoadedLlama load_llama_checkpoint(const Checkpoint& checkpoint);
LoadedLlama load_llama_checkpoint(const std::string& path);
// Whether `path` is a regular file whose safetensors header says model_kind "llama" (only the
// header is read; anything unreadable is simply not one).
bool is_llama_checkpoint(const std::string& path);

// The memory a training run of `batch` windows of `block_size` tokens needs (train/memory.h says
// what is counted): the parameters as llama_parameter_count gives them, the blocks' activations
// with the SwiGLU's three hidden-wide tensors and the attention's weights, the logits. With LoRA
// in `finetune`, gradients and optimizer state are the adapters' alone (everything else is
// frozen); a --freeze alone is counted as if everything trained.
MemoryEstimate estimate_llama_training_memory(const LlamaOptions& model, int64_t batch, int64_t block_size,
                                              const TrainerOptions& trainer, const FineTuneOptions& finetune = {});

}  // namespace ag
