// train_gpt: trains a small GPT language model on a text (by default Debian's fortunes, one token
// per character) and prints a sample at every evaluation, so you can watch it learn to spell.
//
//   build/tools/train_gpt                                  # the baby model, a few minutes
//   build/tools/train_gpt --data my.txt --steps 2000 --save runs/my/ckpt.safetensors
//   build/tools/train_gpt --data bible                     # the King James Bible
//   build/tools/train_gpt --data part1.txt part2.txt       # several files, joined in order
//   build/tools/train_gpt --data shards/ --tokenizer gpt2   # token shards (prepare_text, llm.c, nanoGPT)
//   build/tools/train_gpt --preset llama-tiny               # a Llama-family model, on bytes
//   build/tools/train_gpt --resume runs/train_gpt/fortunes/latest/ckpt.safetensors
//   build/tools/generate --checkpoint runs/train_gpt/fortunes/latest/ckpt.safetensors --prompt "The "
//
// Its checkpoint, metrics log, plot and configuration go to runs/train_gpt/<text>/<n>/ unless
// --save / --log / --plot say otherwise; a text too short for the context is a usage error (exit 2). What every
// training program shares is in training_program.h.
#include <cctype>
#include <cstdlib>
#include <optional>

#include "attograd/core/skip_init.h"
#include "attograd/models/gpt/gpt_memory.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "attograd/models/llama/llama_finetune.h"
#include "attograd/models/llama/llama_load.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/text/bpe.h"
#include "attograd/text/corpus.h"
#include "attograd/text/token_shards.h"
#include "train_gpt_cli.h"

namespace {

using namespace ag;

// --tokenizer: char and byte from the text, gpt2 from the cache, a Hugging Face tokenizer.json
// (a name ending in .json), else a file from train_bpe.
Tokenizer choose_tokenizer(const std::string& choice, const std::string& text) {
  if (choice == "char") return Tokenizer::characters(text);
  if (choice == "byte") return Tokenizer::bytes();
  if (choice.size() > 5 && choice.ends_with(".json")) return load_tokenizer(choice);
  return Tokenizer::bpe(choice == "gpt2" ? BytePairEncoding::gpt2() : BytePairEncoding::load(choice));
}

// One line on what a fine-tuning run starts from and trains; nothing for a run from scratch.
std::string describe_finetune(const FineTuneOptions& f, const Module& model) {
  if (!f.active()) return {};
  std::ostringstream os;
  os << "tune   ";
  if (f.lora_rank > 0) {
    os << "LoRA rank " << f.lora_rank << " alpha " << f.lora().alpha << " on";
    for (const std::string& t : f.lora_targets) os << " " << t;
    os << ", ";
  }
  if (!f.freeze.empty()) {
    os << "frozen:";
    for (const std::string& p : f.freeze) os << " " << p;
    os << ", ";
  }
  int64_t trainable = 0;
  for (const auto& [name, p] : model.trainable_parameters()) trainable += p.numel();
  os << trainable << " of " << model.num_parameters() << " parameters train"
     << (f.adapter_only ? ", checkpoints hold only those" : "") << "\n";
  return os.str();
}

// Whether --data names token shards: every argument a directory or a *.bin file (see
// token_shards.h); text and shards together are refused.
bool data_names_shards(const std::vector<std::string>& data) {
  size_t shards = 0;
  for (const std::string& d : data) shards += !is_corpus_name(d) && names_token_shards(d);
  if (shards > 0 && shards < data.size()) {
    throw UsageError("--data: token shards (directories, *.bin files) and texts cannot be mixed in one run");
  }
  return shards > 0;
}

// The run directory's name of a shard argument: a directory's own name, a file's stem.
std::string shard_stem(const std::string& argument) {
  const std::filesystem::path p(argument);
  const std::filesystem::path name = p.has_filename() ? p.filename() : p.parent_path().filename();
  return std::filesystem::is_directory(p) ? name.string() : p.stem().string();
}

// "3 files (llm.c), 1000000 tokens" for the data line.
std::string describe_files(const std::vector<ShardInfo>& files) {
  uint64_t tokens = 0;
  std::string layouts;
  for (const ShardInfo& f : files) {
    tokens += f.tokens;
    const std::string name = shard_layout_name(f.layout);
    if (layouts.find(name) == std::string::npos) layouts += (layouts.empty() ? "" : ", ") + name;
  }
  return std::to_string(files.size()) + (files.size() == 1 ? " file (" : " files (") + layouts + "), " +
         std::to_string(tokens) + " tokens";
}

// A message about "byte offset N" of the joined text, with N told as the source holding it and
// the offset in that source (read_corpus_sources puts a newline after a text that lacks one).
std::string in_sources(const std::string& message, const Corpus& corpus, const std::vector<std::string>& sources) {
  const std::string key = "at byte offset ";
  const size_t at = message.find(key);
  if (at == std::string::npos || corpus.parts.size() != sources.size()) return message;
  const size_t offset = std::strtoull(message.c_str() + at + key.size(), nullptr, 10);
  size_t start = 0;
  for (size_t i = 0; i < corpus.parts.size(); ++i) {
    const size_t end = start + static_cast<size_t>(corpus.parts[i].bytes);
    if (offset < end) {
      size_t digits = at + key.size();
      while (digits < message.size() && std::isdigit(static_cast<unsigned char>(message[digits]))) ++digits;
      return message.substr(0, at) + "in --data '" + sources[i] + "' at byte offset " + std::to_string(offset - start) +
             message.substr(digits);
    }
    start = end + (end > 0 && end < corpus.text.size() && corpus.text[end - 1] != '\n' ? 1 : 0);
  }
  return message;
}

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

RunData read_run_data(const TrainGPTArgs& a) {
  RunData d;
  d.sources = a.data.empty() ? std::vector<std::string>{"fortunes"} : a.data;
  d.on_shards = data_names_shards(a.data);
  if (!d.on_shards) d.corpus = read_corpus_sources(d.sources);
  for (size_t i = 0; i < d.sources.size(); ++i) {
    d.names += (i > 0 ? " + " : "") + d.sources[i];
    d.stem += (i > 0 ? "+" : "") + (is_corpus_name(d.sources[i]) ? d.sources[i]
                                    : d.on_shards                ? shard_stem(d.sources[i])
                                                                 : std::filesystem::path(d.sources[i]).stem().string());
  }
  d.shard_format = a.shard_format == "nanogpt" ? ShardFormat::nanogpt : ShardFormat::headed;
  d.recorded = d.on_shards ? shard_set_tokenizer(a.data, d.shard_format) : "";
  return d;
}

// Shards that record their tokenizer must have been made by the run's; `chosen` says where the
// run's came from.
void check_shards_tokenizer(const RunData& d, const Tokenizer& tokenizer, const std::string& chosen) {
  if (!d.recorded.empty() && Tokenizer::from_json(d.recorded).to_json() != tokenizer.to_json()) {
    throw std::invalid_argument("--data '" + d.names + "': the shards were made by a " + describe_tokenizer_json(d.recorded) +
                                "; this run's tokenizer (" + chosen + ") is a " + describe_tokenizer(tokenizer) +
                                " (make the shards again with prepare_text --tokenizer of the run, or leave --tokenizer "
                                "out)");
  }
}

// The token shards mapped and their headers checked, or the text tokenized whole; before
// anything is written. Either must hold more than a window. `trained_on`: a resumed run's sources,
// for a message about a text its tokenizer cannot encode.
void read_tokens(const RunData& d, const Tokenizer& tokenizer, double train_fraction, int64_t block,
                 const std::string& trained_on, std::optional<ShardSet>& shards, std::vector<int64_t>& tokens) {
  if (d.on_shards) {
    shards.emplace(open_shard_set(d.sources, tokenizer.vocab_size(), train_fraction, d.shard_format));
    for (const auto& [part, size] : {std::pair{"training", shards->train.size()}, {"validation", shards->val.size()}}) {
      if (size < static_cast<uint64_t>(block) + 1) {
        throw UsageError("--data '" + d.names + "': the " + part + " tokens are " + std::to_string(size) +
                         ", fewer than --block-size " + std::to_string(block) + " + 1 = " + std::to_string(block + 1) +
                         " (give more data or lower --block-size)");
      }
    }
    return;
  }
  try {
    tokens = tokenizer.encode(d.corpus.text);
  } catch (const std::invalid_argument& e) {
    // The tokenizer speaks of the joined text: say which source, where in it, and on a resume
    // which texts the checkpoint's tokenizer was built from.
    throw std::invalid_argument(in_sources(e.what(), d.corpus, d.sources) +
                                (trained_on.empty() ? "" : "; the checkpoint's run read " + trained_on));
  }
  try {
    check_long_enough("whole", tokens.size(), block);
  } catch (const std::invalid_argument& e) {
    throw UsageError("--data '" + d.names + "': " + e.what());
  }
}

// The job on the shards or the tokens, and the "data" line of the run's description.
std::string make_job(std::optional<LanguageModelJob>& job, LanguageModel& model, const RunData& d,
                     const Tokenizer& tokenizer, std::optional<ShardSet>& shards, const std::vector<int64_t>& tokens,
                     const LanguageModelJobOptions& options, bool record_sources) {
  std::ostringstream about;
  if (shards) {
    about << "data   " << d.names << ": token shards, train " << describe_files(shards->train_files);
    if (shards->val_is_tail) {
      about << " of which the last " << shards->val.size() << " validate (no validation file)";
    } else {
      about << ", validation " << describe_files(shards->val_files);
    }
    about << ", read in order; " << tokenizer.kind_name() << " tokenizer, vocab " << tokenizer.vocab_size() << "\n";
    job.emplace(model, tokenizer, std::move(*shards), options);
  } else {
    job.emplace(model, tokenizer, tokens, options, record_sources ? d.corpus.parts : std::vector<CorpusPart>{});
    const TextSplit& split = job->data();
    about << "data   " << d.names << ": " << d.corpus.text.size() << " bytes, " << split.train.size() + split.val.size()
          << " tokens (" << split.train.size() << " train, " << split.val.size() << " validation), "
          << tokenizer.kind_name() << " tokenizer, vocab " << tokenizer.vocab_size() << "\n";
  }
  return about.str();
}

// The run's last lines: the losses, the whole split when asked, where the checkpoint is.
int report_and_finish(TrainingRun& run, LanguageModelJob& job, const TrainSummary& s, bool eval_full) {
  std::cout << std::fixed << std::setprecision(4) << "final train loss " << s.train_loss << ", validation loss "
            << s.eval.loss << " (nats per token), " << s.eval.bits_per_byte << " bits per byte\n";
  if (eval_full && !s.interrupted) {
    // Each process alone reads the whole split: the same number on every rank, rank 0 prints it.
    const SplitLoss whole = job.evaluate_whole_split();
    std::cout << "validation loss over the whole split: " << whole.loss << " over " << whole.windows << " windows, "
              << whole.bits_per_byte << " bits per byte\n";
  }
  return run.finish(s, ", sample with generate --checkpoint " + run.checkpoint_path());
}

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

int run(const TrainGPTArgs& a) {
  TrainingRun run(a, {"gpt", "llama"});
  if (run.kind() == "llama" || (!run.checkpoint() && a.family == "llama")) return run_llama(a, run);
  const Checkpoint* ck = run.checkpoint();
  const TrainerOptions& t = run.trainer;
  const RunData d = read_run_data(a);
  const std::vector<std::string>& sources = d.sources;
  const bool on_shards = d.on_shards;
  const Corpus& corpus = d.corpus;
  const std::string& text = corpus.text;
  const std::string& data = d.names;
  const std::string& data_stem = d.stem;
  // A fine-tuning run takes its model and tokenizer from its base (--init-from) when the base is
  // an attograd checkpoint; the other layouts hold weights only, which the flags or --preset
  // describe. A resumed run takes them from its checkpoint.
  const FineTuneOptions finetune =
      (ck ? finetune_options_from(*ck) : a.finetune).with_default_targets(gpt_lora_default_targets());
  const bool from_base = !ck && !finetune.init_from.empty() &&
                         gpt_weights_layout(finetune.init_from) == GPTWeightsLayout::attograd;
  std::optional<Checkpoint> base;  // such a base, opened (read and checked) once
  if (from_base) base.emplace(Checkpoint::open(finetune.init_from));
  // Shards made by prepare_text record their tokenizer: it is the run's unless something else
  // chose one (--tokenizer, --preset, a base's config.json, the checkpoint), which must then be
  // the same. llm.c's and nanoGPT's files record none, and need --tokenizer.
  const std::string& recorded = d.recorded;
  const bool tokenizer_chosen = a.tokenizer_given || a.tokenizer != "char";
  if (on_shards && !ck && !base && a.tokenizer == "char" && (a.tokenizer_given || recorded.empty())) {
    throw UsageError("--data '" + data + "' names token shards" +
                     (recorded.empty() ? " that do not record their tokenizer (llm.c's or nanoGPT's layout): give the "
                                         "--tokenizer they were made with (byte, gpt2 or a vocabulary file of train_bpe)"
                                       : ": a character tokenizer is built from a text; leave --tokenizer out to use "
                                         "the one the shards record"));
  }
  const Tokenizer tokenizer = [&] {
    if (ck) return gpt_tokenizer_from(*ck);
    if (base) return gpt_tokenizer_from(*base);
    if (!recorded.empty() && !tokenizer_chosen) return Tokenizer::from_json(recorded);
    try {
      return choose_tokenizer(a.tokenizer, text);  // a character vocabulary reads the whole text
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(in_sources(e.what(), corpus, sources));
    }
  }();
  check_shards_tokenizer(d, tokenizer,
                         ck               ? "the checkpoint's, '" + ck->path() + "'"
                         : base           ? "the base's, '" + finetune.init_from + "'"
                         : a.tokenizer_given ? "--tokenizer " + a.tokenizer
                                             : "GPT-2's, which --preset or --init-from implies");
  GPTOptions m = ck ? gpt_options_from(*ck) : base ? gpt_options_from(*base) : a.model;
  if (!ck && !a.preset.empty() && tokenizer.vocab_size() != gpt_preset(a.preset).vocab) {
    throw UsageError("--preset " + a.preset + ": GPT-2's models read " + std::to_string(gpt_preset(a.preset).vocab) +
                     " tokens, the " + tokenizer.kind_name() + " tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                     " (use --tokenizer gpt2, or give the model's size with --layers, --heads, --d-model, --block-size)");
  }
  m.vocab = tokenizer.vocab_size();
  GPTJobOptions options = ck ? gpt_job_options_from(*ck, a.job) : a.job;
  run.check_fits(options.batch, estimate_training_memory(m, options.batch, t),
                   "the size is driven by --d-model, --layers and the vocabulary (parameters and optimizer state) "
                   "and by --batch, --block-size and --heads (activations)");
  std::optional<ShardSet> shards;
  std::vector<int64_t> tokens;
  read_tokens(d, tokenizer, options.train_fraction, m.block_size, ck ? gpt_data_sources(*ck) : "", shards, tokens);
  try {
    check_against_model(options, m);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--eval-stride / --block-size: ") + e.what());
  }
  // Fine-tuning options that cannot be are refused before anything is written.
  if (!ck && finetune.active()) validate_finetune(m, finetune);
  std::ostringstream title, about;
  title << "GPT on " << data_stem << ": " << m.n_layers << " layers, d_model " << m.d_model << ", context "
        << m.block_size;
  // The base's weights are read before the run's directory exists: a file that does not fit
  // leaves nothing behind. They are all the file's, so none is drawn first; the adapters are
  // drawn after prepare() has seeded the generator, as a fresh model is.
  const bool load_base = !ck && !finetune.init_from.empty();
  std::optional<GPT> model;
  std::string init;
  if (load_base) {
    {
      const SkipInitGuard no_init;
      model.emplace(m);
    }
    const GPTWeightsLayout layout = load_initial_weights(finetune.init_from, *model, base ? &*base : nullptr);
    base.reset();  // its bytes are in the model now
    init = std::string("init   ") + gpt_weights_layout_name(layout) + " weights from " + finetune.init_from + "\n";
  }
  run.prepare(data_stem, title.str());

  tune_model(model, m, ck, finetune, load_base, run, options);
  // A checkpoint written before the data entry named the sources resumes without them: its
  // entry is the old one, and the token checksum alone still refuses another text.
  const bool record_sources = !ck || gpt_data_names_corpus(*ck);
  std::optional<GPTJob> job_storage;
  about << make_job(job_storage, *model, d, tokenizer, shards, tokens, options, record_sources);
  GPTJob& job = *job_storage;
  about
        << "model  GPT " << m.n_layers << " layers, " << m.n_head << " heads, d_model " << m.d_model << ", context "
        << m.block_size << ", dropout " << m.dropout << (m.bias ? "" : ", no biases") << ", "
        << model->num_parameters() << " parameters" << (m.activation == Activation::gelu ? "" : ", tanh GELU") << "\n"
        << init << describe_finetune(finetune, *model)
        << describe_training(t, "batch " + std::to_string(options.batch) + ", " + std::to_string(t.steps) +
                                    " steps, seed " + std::to_string(options.seed));
  const TrainSummary s = run.train(job, about.str());
  return report_and_finish(run, job, s, a.eval_full);
}

}  // namespace

int main(int argc, char** argv) { return ag::training_program_main<ag::TrainGPTArgs>(argc, argv, run); }
