// train_gpt's run of a Llama-family model: --preset llama-tiny (or another Llama preset) from
// scratch, --init-from a Hugging Face directory of the family or a Llama checkpoint to fine-tune,
// or the resume of either. What both families' runs share is train_gpt_run.h.
#include <filesystem>
#include <optional>
#include <sstream>

#include "attograd/core/skip_init.h"
#include "attograd/models/llama/llama_finetune.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/models/llama/llama_load.h"
#include "train_gpt_run.h"

namespace ag {

// A Llama-family run (--preset llama-tiny, --init-from a Hugging Face directory or a Llama
// checkpoint, or the resume of one): the preset's shape with the tokenizer's vocabulary, or the
// base's shape, trained on windows of --block-size tokens.
int run_llama(const TrainGPTArgs& a, TrainingRun& run) {
  const Checkpoint* ck = run.checkpoint();
  const TrainerOptions& t = run.trainer;
  const RunData d = read_run_data(a);
  // A fine-tuning run takes its shape from its base: a directory's config.json, or a checkpoint's
  // model entry (with its tokenizer). A resumed run takes them from its checkpoint.
  const FineTuneOptions finetune =
      (ck ? finetune_options_from(*ck) : a.finetune).with_default_targets(llama_lora_default_targets());
  const bool from_directory = !ck && !finetune.init_from.empty() && std::filesystem::is_directory(finetune.init_from);
  std::optional<Checkpoint> base;  // a checkpoint base, opened once
  if (!ck && !finetune.init_from.empty() && !from_directory) base.emplace(Checkpoint::open(finetune.init_from));
  if (d.on_shards && !ck && a.tokenizer == "char") {
    throw UsageError("--data '" + d.names + "' names token shards: a character tokenizer is built from a text; leave "
                     "--tokenizer out to use the one the shards record, or give the one they were made with");
  }
  const bool tokenizer_chosen = a.tokenizer_given || a.preset != "llama-tiny";
  const Tokenizer tokenizer = [&] {
    if (ck) return llama_tokenizer_from(*ck);
    if (base) return llama_tokenizer_from(*base);
    if (!d.recorded.empty() && !tokenizer_chosen) return Tokenizer::from_json(d.recorded);
    try {
      return choose_tokenizer(a.tokenizer, d.corpus.text);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(in_sources(e.what(), d.corpus, d.sources));
    }
  }();
  check_shards_tokenizer(d, tokenizer,
                         ck     ? "the checkpoint's, '" + ck->path() + "'"
                         : base ? "the base's, '" + finetune.init_from + "'"
                                : "--tokenizer " + a.tokenizer);
  LlamaOptions m = ck               ? llama_options_from(*ck)
                   : base           ? llama_options_from(*base)
                   : from_directory ? llama_options_from_hf_config(
                                          (std::filesystem::path(finetune.init_from) / "config.json").string())
                                    : llama_preset(a.preset);
  if (!ck && finetune.init_from.empty()) m.vocab = tokenizer.vocab_size();  // a base's table is its own
  if (m.vocab < tokenizer.vocab_size()) {
    throw UsageError("--tokenizer " + a.tokenizer + ": its " + std::to_string(tokenizer.vocab_size()) +
                     " tokens do not fit the model's vocabulary of " + std::to_string(m.vocab) + " (" +
                     finetune.init_from + ")");
  }
  LanguageModelJobOptions options = ck ? lm_job_options_from(*ck, "llama", a.job) : a.job;
  const int64_t block = window_length(options, m.max_positions);
  run.check_fits(options.batch, estimate_llama_training_memory(m, options.batch, block, t, finetune),
                 "the size is driven by --preset and the vocabulary (parameters and optimizer state) and by --batch "
                 "and --block-size (activations)");
  std::optional<ShardSet> shards;
  std::vector<int64_t> tokens;
  read_tokens(d, tokenizer, options.train_fraction, block, ck ? lm_data_sources(*ck, "llama") : "", shards, tokens);
  try {
    check_against_model(options, m.max_positions);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--eval-stride / --block-size: ") + e.what());
  }
  // Fine-tuning options that cannot be are refused before anything is written.
  if (!ck && finetune.active()) validate_finetune(m, finetune);
  std::ostringstream title;
  title << "Llama on " << d.stem << ": " << m.n_layers << " layers, d_model " << m.d_model << ", window " << block;
  // The base's weights are read before the run's directory exists (a base that does not fit
  // leaves nothing behind) and none is drawn for them; the adapters are drawn after prepare()
  // has seeded the generator, as a fresh model is.
  std::optional<Llama> model;
  std::string init;
  const bool load_base = !ck && !finetune.init_from.empty();
  if (load_base) {
    {
      const SkipInitGuard no_init;
      model.emplace(m);
    }
    init = "init   " + load_initial_weights(finetune.init_from, *model, base ? &*base : nullptr) + " " +
           finetune.init_from + "\n";
    base.reset();
  }
  run.prepare(d.stem, title.str());

  tune_model(model, m, ck, finetune, load_base, run, options);
  std::optional<LanguageModelJob> job;
  std::ostringstream about;
  about << make_job(job, *model, d, tokenizer, shards, tokens, options, true);
  const LlamaOptions& r = model->options();
  about << "model  Llama " << r.n_layers << " layers, " << r.n_head << " heads over " << r.n_kv_head
        << " key/value heads, d_model " << r.d_model << ", MLP " << r.d_hidden << ", context " << r.max_positions
        << ", window " << block << (r.tie_word_embeddings ? ", tied head" : "") << ", " << model->num_parameters()
        << " parameters\n"
        << init << describe_finetune(finetune, *model)
        << describe_training(t, "batch " + std::to_string(options.batch) + ", " + std::to_string(t.steps) +
                                    " steps, seed " + std::to_string(options.seed));
  const TrainSummary s = run.train(*job, about.str());
  return report_and_finish(run, *job, s, a.eval_full);
}

}  // namespace ag
