// The per-module half of the parity runner (internal to tools/parity): how each supported
// module is built from a fixture's config, which tensors it reads as inputs and masks, and what
// it returns for comparison. The driver (parity.cpp) does the backward pass and the comparisons
// the same way for every module.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attograd/autograd/nn_ops.h"
#include "attograd/autograd/variable.h"
#include "attograd/layers/attention_mask.h"
#include "attograd/layers/module.h"
#include "fixture.h"
#include "parity.h"

namespace ag::parity {

struct ModuleRun {
  std::unique_ptr<Module> module;  // its named_parameters() are compared with expect.grad.param.*
  NamedVariables inputs;           // floating inputs (input.<name>) compared with expect.grad.input.<name>
  Variable output;                 // compared with expect.output; backward starts here
  std::vector<std::pair<std::string, Tensor>> extras;  // compared with expect.<name>, e.g. attn_weights
};

// Builds and runs the module the fixture names (not TrainingRun). FixtureError for an unknown
// module or a config the module rejects.
ModuleRun run_module(const Fixture& fixture);

// Shared by the builders in modules.cpp and model.cpp.
// Converts `module` to the fixture's dtype, sets train/eval and loads param.* (strict).
void prepare(Module& module, const Fixture& fixture);
// The mask the fixture describes for attention over (B, ., Tq, Tk): metadata causal,
// mask.key_padding_lengths (I64, (B)) and mask.keep (0/1, broadcastable), combined with &.
AttentionMask read_mask(const Fixture& fixture, int64_t B, int64_t Tq, int64_t Tk);

// SequenceModel: ids, targets -> cross-entropy loss (model.cpp).
ModuleRun run_sequence_model(const Fixture& fixture);
// TrainingRun: the loss at every AdamW step against expect.loss (model.cpp).
std::vector<TensorComparison> run_training(const Fixture& fixture);
// The golden run behind both: AdamW from config.optimizer, config.steps updates of `params` on
// input.ids / input.targets (steps, B, T) through `logits`, each loss against expect.loss.
std::vector<TensorComparison> run_golden_adamw(const Fixture& fixture, const NamedVariables& params,
                                               const std::function<Variable(const Indices&)>& logits,
                                               const CrossEntropyOptions& loss_options);
// The same loop over any stored batches: loss_at(s) is step s's loss under the current
// parameters (the caller reads its own inputs).
std::vector<TensorComparison> run_golden_adamw(const Fixture& fixture, const NamedVariables& params,
                                               const std::function<Variable(int64_t step)>& loss_at);
// Step `s` of a stack of batches (steps, ...) -> (...).
Indices step_of(const Indices& all, int64_t s);
// GPT: ids -> logits; GPTTrainingRun: the GPT's loss at every AdamW step (gpt.cpp).
ModuleRun run_gpt(const Fixture& fixture);
// Seq2Seq: src, tgt and their lengths -> logits; Seq2SeqTrainingRun: its loss at every AdamW
// step on stored padded batches (seq2seq.cpp).
ModuleRun run_seq2seq(const Fixture& fixture);
std::vector<TensorComparison> run_seq2seq_training(const Fixture& fixture);
std::vector<TensorComparison> run_gpt_training(const Fixture& fixture);

}  // namespace ag::parity
