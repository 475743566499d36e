// LanguageModel: what a decoder-only language model offers whatever its family, so that the one
// next-token training job (text/lm_job.h) and the programs built on it train, evaluate and
// sample any family through this interface: GPT (models/gpt/) and the Llama family
// (models/llama/) implement it.
//
//   ids (B, T) --forward--> logits (B, T, vocab_size())
//   loss(ids, targets): the mean cross-entropy of those logits against targets (B, T)
//
// A family's class keeps everything else its own (its options, its KV cache, its files); the
// interface is the few calls a training run makes on a model it did not build.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/autograd/variable.h"
#include "attograd/core/indices.h"
#include "attograd/layers/decoding.h"
#include "attograd/layers/module.h"

namespace ag {

class LanguageModel : public Module {
 public:
  // "gpt", "llama": the checkpoint's model_kind for a run that trains this model.
  virtual std::string family() const = 0;
  // The model's options as JSON text (the checkpoint's "model" entry); the family's loader
  // builds the same model from it.
  virtual std::string options_json() const = 0;
  // The tokens the output layer scores (the logits' last dimension).
  virtual int64_t vocab_size() const = 0;
  // The longest sequence one forward takes.
  virtual int64_t context_length() const = 0;

  // Logits (B, T, vocab_size()) of ids (B, T), T at most context_length().
  virtual Variable forward(const Indices& ids) = 0;
  // The mean next-token cross-entropy of ids (B, T) predicting targets (B, T): equal to the
  // cross-entropy of forward(ids), which a family may compute in pieces to save memory.
  virtual Variable loss(const Indices& ids, const Indices& targets) = 0;
  // The new tokens continuing `prompt` (layers/decoding.h's options), every option checked
  // first (std::invalid_argument naming it).
  virtual std::vector<int64_t> generate(const std::vector<int64_t>& prompt, const GenerateOptions& options) = 0;
  // Activation recompute of the model's blocks for training (autograd/recompute.h).
  virtual void set_recompute(bool on) = 0;
};

}  // namespace ag
