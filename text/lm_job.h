// LanguageModelJob: a language model's part of a training run (train/job.h): next-token
// prediction on a stream of tokens, for a model of any family (layers/language_model.h: GPT,
// the Llama family). models/gpt/gpt_job.h names it GPTJob.
//
//   manual_seed(seed);                                     // the model's initialisation
//   GPT model(gpt_options);                                // vocab = tokenizer.vocab_size()
//   LanguageModelJob job(model, tokenizer, tokenizer.encode(text), {.batch = 32, .seed = seed});
//   Trainer trainer(job, {.optimizer = OptimizerKind::adamw, .lr = 1e-3, .steps = 2000});
//
// The windows are block_size tokens long: the option when set, else the model's context
// (GPT's block_size; a Llama's max_positions is usually far longer than a run trains on). The
// checkpoint's model_kind is the model's family ("gpt", "llama").
//
// The tokens are split once, the first train_fraction for training and the rest for validation
// (split_tokens). Batch n is sample_batch(train, seed, n): random windows, a pure function of
// (seed, n), so a resumed run sees the very batches of an uninterrupted one. The loss is the
// mean cross-entropy of logits (B, T, V) against the next tokens (B, T). An evaluation is the
// mean loss over the same fixed validation windows (eval_batches) plus, on rank 0, a short
// sample from a fixed prompt (seeded, so two runs print the same text).
//
// Every held-out loss is also given in bits per byte of text: the total nats over the evaluated
// targets / ln 2 / the bytes of those targets' text (Tokenizer::token_bytes), so that runs with
// different tokenizers compare on one scale. For the byte tokenizer it is the loss / ln 2.
//
// Checkpoint entries: "model" (LanguageModel::options_json), "tokenizer" (Tokenizer::to_json, so
// generation needs no data file) and "data" (batch, seed, train_fraction, the token count and a
// checksum of the tokens, so a resume on another text is refused, and "corpus": the name, bytes
// and checksum of every source of the text in order, when the caller gave them). A checkpoint
// written before "corpus" existed resumes with a job given no sources (lm_data_names_corpus).
// A block_size option is recorded there too ("block_size"), when set.
//
// On token shards (text/token_shards.h) the job reads its batches in order through the
// training shards (sequential_batch: step n's rows are the windows n * batch + r) and validates
// on the validation shards' evenly spaced windows, both through the mapping, so its memory does
// not grow with the set. Its "data" entry then holds "shards" and "val_shards" (each file's
// name, layout, bytes, token count and the CRC-32C of its first and last MiB) and "validation"
// ("shards", or "tail" when the last 1 - train_fraction of the training tokens validate) in
// place of the token count and checksum. --eval-stride and evaluate_whole_split read the
// validation tokens into memory while they score them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attograd/layers/language_model.h"
#include "attograd/text/corpus.h"
#include "attograd/text/token_shards.h"
#include "attograd/text/tokenizer.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/job.h"

namespace ag {

// The longest window (and perplexity stride) a job takes.
inline constexpr int64_t kMaxBlockSize = int64_t{1} << 20;

struct LanguageModelJobOptions {
  // What the trajectory depends on: stored in checkpoints ("data") and required to match.
  int64_t batch = 32;            // windows per step (each block_size tokens long)
  int64_t block_size = 0;        // tokens per window; 0: the model's context_length()
  uint64_t seed = 0;             // the batches; the caller seeds init and dropout with manual_seed
  double train_fraction = 0.9;   // of the tokens for training, the rest validates
  // What only observes the run.
  int64_t eval_windows = 64;       // validation windows per evaluation (at most; whole batches)
  int64_t sample_tokens = 100;     // generated at every evaluation; 0 generates none
  std::string sample_prompt = "\n";  // the text the sample continues
  // When above 0, every evaluation also scores the whole validation split with sliding windows
  // of block_size tokens at this stride (train/text_score.h); at most block_size.
  int64_t eval_stride = 0;
  // The "finetune" entry of a fine-tuning run (train/finetune.h: prepare_finetune_with), recorded in
  // the metadata and required to match on resume; empty for a run from scratch (no entry).
  std::string finetune{};
};

// Throws std::invalid_argument naming the first bad option and its value.
void validate(const LanguageModelJobOptions& options);

// What the job checks of its options against the model and of its text, callable before
// anything is built (a program's early checks call these instead of repeating them): a
// block_size within the model's context, eval_stride within the window, and a text (or a `part`
// of one: "whole", "validation part of the") of at least block_size + 1 tokens.
// std::invalid_argument naming the values. window_length: the block_size the job will use.
int64_t window_length(const LanguageModelJobOptions& options, int64_t context_length);
void check_against_model(const LanguageModelJobOptions& options, int64_t context_length);
void check_long_enough(const char* part, size_t tokens, int64_t block_size);

// The mean loss over a whole validation split (nats per token and bits per byte of text), and
// the windows it was taken over.
struct SplitLoss {
  double loss = 0;
  double bits_per_byte = 0;
  int64_t windows = 0;
};

class LanguageModelJob : public TrainingJob {
 public:
  // The model must outlive the job and have vocab_size() == tokenizer.vocab_size(). Validates the
  // options and checks that both parts of the split hold at least block_size + 1 tokens
  // (std::invalid_argument naming both numbers). A sample prompt the tokenizer cannot encode
  // falls back to the first training token. `corpus`: the sources of the text the tokens encode
  // (read_corpus_sources), recorded in the "data" entry; none, none recorded.
  LanguageModelJob(LanguageModel& model, Tokenizer tokenizer, const std::vector<int64_t>& tokens,
                   const LanguageModelJobOptions& options, const std::vector<CorpusPart>& corpus = {});
  // The same job on token shards (see the top): the shards' tokens must be below the
  // tokenizer's vocabulary (each read checks), both streams at least block_size + 1 long.
  LanguageModelJob(LanguageModel& model, Tokenizer tokenizer, ShardSet shards, const LanguageModelJobOptions& options);

  StepLoss loss(uint64_t index, const Shard& rows) override;
  Evaluation evaluate(const Ranks& ranks) override;
  std::map<std::string, std::string> metadata() const override;
  void set_recompute(bool on) override { model_.set_recompute(on); }

  // The mean loss over every non-overlapping window of the validation split (tiled_batches: each
  // validation token but the first predicted once), where evaluate() reads eval_windows of them;
  // in eval mode without a graph, the model's mode restored. Over several processes each rank
  // takes its part of every batch.
  SplitLoss evaluate_whole_split(const Ranks& ranks = Ranks());

  // sample_tokens tokens continuing the sample prompt (temperature 0.8, top-k 40, seed `seed`),
  // decoded; the default generator is left as it was.
  std::string sample();

  const LanguageModelJobOptions& options() const { return options_; }
  // The tokens per window (the block_size option, or the model's context).
  int64_t block_size() const { return block_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  // The text's split; empty for a job on shards.
  const TextSplit& data() const { return data_; }
  // The shards of a job on shards, else nullptr.
  const ShardSet* shards() const { return shards_.get(); }

 private:
  LanguageModel& model_;
  Tokenizer tokenizer_;
  LanguageModelJobOptions options_;
  int64_t block_ = 0;
  TextSplit data_;
  std::string data_json_;  // the "data" entry
  std::vector<TextBatch> eval_;
  std::vector<int64_t> prompt_;
  std::vector<int64_t> token_bytes_;  // the tokenizer's bytes per id
  std::shared_ptr<const ShardSet> shards_;  // a job on shards: its set; data_ stays empty

  // What both constructors check before any data: the options, the model's vocabulary against
  // the tokenizer's, the window and the perplexity stride against the model's context; sets
  // block_.
  void check_options();
  // The samples' prompt: the options' text when it encodes to at most a window, else the first
  // training token.
  void set_prompt(int64_t first_token);
  // The validation tokens as a vector: data_.val, or the validation shards read into `held`.
  const std::vector<int64_t>& validation_tokens(std::vector<int64_t>& held) const;

  // The mean loss over every window of `batches` (nats per token, bits per byte), each
  // window's rows split over the ranks.
  struct HeldOutLoss {
    double loss = 0, bits_per_byte = 0;
  };
  HeldOutLoss mean_loss(const std::vector<TextBatch>& batches, const Ranks& ranks);
};

// The trajectory options of a language model checkpoint's "data" entry, into `base` (whose
// observing options are kept); std::runtime_error naming the file when it is missing or invalid,
// or when the checkpoint's model_kind is not `family`.
LanguageModelJobOptions lm_job_options_from(const Checkpoint& checkpoint, const std::string& family,
                                            const LanguageModelJobOptions& base);
// Whether the checkpoint's "data" entry describes the corpus's sources ("corpus"); false for one
// written before train_gpt read several, whose resume builds its job without them.
bool lm_data_names_corpus(const Checkpoint& checkpoint, const std::string& family);
// "fortunes + notes.txt (2546284 + 1200 bytes)": the sources of a checkpoint's run, for
// messages about its data; "" for a checkpoint that does not name them (or ran on shards).
std::string lm_data_sources(const Checkpoint& checkpoint, const std::string& family);

// The loaders for inference are the families' (models/gpt/gpt_load.h, models/llama/llama_hf.h),
// which need no training job.

}  // namespace ag
