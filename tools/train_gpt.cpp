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
#include <optional>
#include <sstream>

#include "attograd/core/skip_init.h"
#include "attograd/models/gpt/gpt_memory.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "train_gpt_run.h"

namespace {

using namespace ag;

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
