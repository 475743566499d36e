#include "train_gpt_run.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "attograd/text/bpe.h"
#include "attograd/text/hf_tokenizer.h"

namespace ag {

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

namespace {

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

}  // namespace

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

}  // namespace ag
