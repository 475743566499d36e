// What both families' runs of train_gpt share (train_gpt.cpp runs a GPT, train_gpt_llama.cpp a
// Llama-family model): the tokenizer a flag names, the data a run reads (a text or token shards)
// and its tokens, the language model job over them, the fine-tuning of a model and the run's last
// lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attograd/text/corpus.h"
#include "attograd/text/lm_job.h"
#include "attograd/text/token_shards.h"
#include "attograd/text/tokenizer.h"
#include "attograd/train/finetune.h"
#include "train_gpt_cli.h"

namespace ag {

// --tokenizer: char and byte from the text, gpt2 from the cache, a Hugging Face tokenizer.json
// (a name ending in .json), else a file from train_bpe.
Tokenizer choose_tokenizer(const std::string& choice, const std::string& text);

// One line on what a fine-tuning run starts from and trains; nothing for a run from scratch.
std::string describe_finetune(const FineTuneOptions& f, const Module& model);

// What the run reads and what the messages and the run's directory call it ("fortunes",
// "kjv.txt", "a.txt + b.txt"), for either family.
struct RunData {
  std::vector<std::string> sources;
  bool on_shards = false;
  Corpus corpus;             // the joined text; empty on shards
  std::string names, stem;   // "a.txt + b.txt", "a+b"
  ShardFormat shard_format = ShardFormat::headed;
  std::string recorded;      // the tokenizer the shards record, as JSON; empty: none
};
RunData read_run_data(const TrainGPTArgs& a);

// A message about "byte offset N" of the joined text, with N told as the source holding it and
// the offset in that source.
std::string in_sources(const std::string& message, const Corpus& corpus, const std::vector<std::string>& sources);

// Shards that record their tokenizer must have been made by the run's; `chosen` says where the
// run's came from.
void check_shards_tokenizer(const RunData& d, const Tokenizer& tokenizer, const std::string& chosen);

// The token shards mapped and their headers checked, or the text tokenized whole; before
// anything is written. Either must hold more than a window. `trained_on`: a resumed run's sources,
// for a message about a text its tokenizer cannot encode.
void read_tokens(const RunData& d, const Tokenizer& tokenizer, double train_fraction, int64_t block,
                 const std::string& trained_on, std::optional<ShardSet>& shards, std::vector<int64_t>& tokens);

// The job on the shards or the tokens, and the "data" line of the run's description.
std::string make_job(std::optional<LanguageModelJob>& job, LanguageModel& model, const RunData& d,
                     const Tokenizer& tokenizer, std::optional<ShardSet>& shards, const std::vector<int64_t>& tokens,
                     const LanguageModelJobOptions& options, bool record_sources);

// The run's last lines: the losses, the whole split when asked, where the checkpoint is.
int report_and_finish(TrainingRun& run, LanguageModelJob& job, const TrainSummary& s, bool eval_full);

// After run.prepare() has seeded the generator: the model of either family (built now unless a
// base was read into it before), and what fine-tuning does to it: a resumed run's checkpoint
// rebuilds its adapters and frozen parameters, a fresh run's options put them in place
// (prepare_finetune of the family). The job records the "finetune" entry either way.
template <class Model, class ModelOptions>
void tune_model(std::optional<Model>& model, const ModelOptions& shape, const Checkpoint* ck,
                const FineTuneOptions& finetune, bool base_loaded, TrainingRun& run, LanguageModelJobOptions& options) {
  if (!model) model.emplace(shape);
  if (ck) {
    restore_finetune(*ck, *model);
    if (ck->has_entry("finetune")) options.finetune = ck->entry("finetune");
  } else if (finetune.active()) {
    options.finetune = prepare_finetune(*model, finetune, base_loaded);
  }
  run.save_trainable_only(finetune.adapter_only);
}

// A Llama-family run (train_gpt_llama.cpp).
int run_llama(const TrainGPTArgs& a, TrainingRun& run);

}  // namespace ag
