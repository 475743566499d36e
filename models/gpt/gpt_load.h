// A GPT for inference, with no training job: from a checkpoint of train_gpt (load_gpt_checkpoint),
// or from any file that holds one (load_gpt): an attograd checkpoint, a Hugging Face
// GPT-2 directory (config.json and model.safetensors) or its model.safetensors alone, a nanoGPT
// state_dict saved as safetensors, or llm.c's .bin. No training step is needed to turn another
// tool's weights into a checkpoint first.
//
//   LoadedGPT g = load_gpt("gpt2/");                                  // Hugging Face's GPT-2 124M
//   LoadedGPT h = load_gpt("tiny.safetensors", {.tokenizer = "byte", .n_head = 4});
//
// The network comes from the file (gpt_shape_of_weights: the llm.c header, the tensors' shapes,
// the config.json beside a safetensors file when there is one) and the hints fill only what the
// file does not say; for an attograd checkpoint the hints must be empty, since it says all. The
// tokenizer of a file of another tool is the hint's (byte, gpt2 or a vocabulary file of
// train_bpe), or GPT-2's when the vocabulary is GPT-2's 50,257 tokens; it must have the model's
// vocabulary. The memory is estimated before anything is built. Errors are std::runtime_error
// naming the file, or std::invalid_argument naming the hint.
#pragma once

#include <cstdint>
#include <string>

#include <memory>

#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "attograd/text/corpus.h"
#include "attograd/train/io/checkpoint.h"

namespace ag {

// A trained model for generation: built from the checkpoint's options with its parameters
// loaded (the optimizer state is ignored), in eval mode. A fine-tuning run's checkpoint comes
// back with its adapters (and, when it holds only them, its base read again: restore_finetune).
// std::runtime_error naming the file when it is not a GPT checkpoint or an entry is missing or
// invalid.
struct LoadedGPT {
  std::unique_ptr<GPT> model;
  Tokenizer tokenizer;
  int64_t step = 0;
};
LoadedGPT load_gpt_checkpoint(const Checkpoint& checkpoint);
LoadedGPT load_gpt_checkpoint(const std::string& path);

// The model and tokenizer entries of a GPT checkpoint, checked against each other.
GPTOptions gpt_options_from(const Checkpoint& checkpoint);
Tokenizer gpt_tokenizer_from(const Checkpoint& checkpoint);

struct GPTFileHints {
  std::string tokenizer;   // "byte", "gpt2" or a vocabulary file; empty: GPT-2's for its vocabulary
  int64_t n_head = 0;      // 0: config.json's, else d_model / 64 (Hugging Face)
  std::string activation;  // empty: config.json's, else the layout's own
  bool need_tokenizer = true;  // false (an export): a file of another tool gets the byte tokenizer as a stand-in
  bool empty() const { return tokenizer.empty() && n_head == 0 && activation.empty(); }
};

struct LoadedGPTFile {
  LoadedGPT gpt;
  GPTWeightsLayout layout = GPTWeightsLayout::attograd;
  std::string weights;   // the file read: `path`, or the model.safetensors of a directory
  std::string shape_from;  // for a file of another tool, where its heads and activation came from
};

LoadedGPTFile load_gpt(const std::string& path, const GPTFileHints& hints = {});

}  // namespace ag
