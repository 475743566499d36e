#include "attograd/text/lm_job.h"

#include <cmath>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "attograd/autograd/grad_mode.h"
#include "attograd/core/format.h"
#include "attograd/core/rng.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/losses.h"
#include "attograd/train/memory.h"
#include "attograd/train/text_score.h"
#include "attograd/train/trainer.h"

namespace ag {

namespace {

// The "data" entry: the trajectory options and a fingerprint of the token stream (resuming on
// another text, or another tokenisation of it, would silently train a different run).
constexpr auto kDataFields = [](auto& o, auto&& field) {
  field("batch", o.batch), field("seed", o.seed), field("train_fraction", o.train_fraction);
};

// The trajectory fields; block_size only when set, so that the entries of runs that leave it to
// the model (every GPT run) read as they did before the option existed.
OrderedJson trajectory_json(const LanguageModelJobOptions& o) {
  OrderedJson j = fields_to_json(o, kDataFields);
  if (o.block_size != 0) j["block_size"] = o.block_size;
  return j;
}

std::string data_json(const LanguageModelJobOptions& o, const std::vector<int64_t>& tokens, const std::vector<CorpusPart>& corpus) {
  OrderedJson j = trajectory_json(o);
  j["tokens"] = tokens.size();
  j["crc32c"] = crc32c(tokens.data(), tokens.size() * sizeof(int64_t));
  // The sources by name, size and checksum: a resume or a rank on other files (or the same in
  // another order) is refused with the two lists side by side, not only two token checksums.
  if (!corpus.empty()) {
    OrderedJson parts = OrderedJson::array();
    for (const CorpusPart& p : corpus) parts.push_back({{"name", p.name}, {"bytes", p.bytes}, {"crc32c", p.crc32c}});
    j["corpus"] = std::move(parts);
  }
  return j.dump();
}

// The "data" entry of a job on shards: the files by name (not path, so a moved set resumes),
// layout, size, token count and the checksum of each whole file, read at open.
std::string shard_data_json(const LanguageModelJobOptions& o, const ShardSet& set) {
  OrderedJson j = trajectory_json(o);
  const auto files = [](const std::vector<ShardInfo>& infos) {
    OrderedJson list = OrderedJson::array();
    for (const ShardInfo& i : infos) {
      list.push_back({{"name", std::filesystem::path(i.path).filename().string()},
                      {"layout", shard_layout_name(i.layout)},
                      {"bytes", i.file_bytes},
                      {"tokens", i.tokens},
                      {"crc32c", i.crc32c}});
    }
    return list;
  };
  j["shards"] = files(set.train_files);
  j["val_shards"] = files(set.val_files);
  j["validation"] = set.val_is_tail ? "tail" : "shards";
  return j.dump();
}

LanguageModelJobOptions data_options_from_json(const std::string& text, const LanguageModelJobOptions& base) {
  const std::string op = "language model data options: ";
  LanguageModelJobOptions o = fields_from_json(text, kDataFields, op, base,
                                               {"tokens", "crc32c", "corpus", "shards", "val_shards", "validation", "block_size"});
  const Json j = parse_json(text);
  const auto block = j.find("block_size");
  o.block_size = 0;
  if (block != j.end()) {
    if (!block->is_number_integer()) throw std::invalid_argument(op + "block_size must be an integer, got " + block->dump());
    o.block_size = block->get<int64_t>();
  }
  return validated(o, op);
}

}  // namespace

void validate(const LanguageModelJobOptions& o) {
  const auto int_in = [&](const char* key, int64_t v, int64_t low, int64_t high) {
    if (v < low || v > high) {
      throw std::invalid_argument("language model job: " + std::string(key) + " must lie in [" + std::to_string(low) + ", " +
                                  std::to_string(high) + "], got " + std::to_string(v));
    }
  };
  int_in("batch", o.batch, 1, int64_t{1} << 20);
  int_in("block_size", o.block_size, 0, kMaxBlockSize);
  if (!(o.train_fraction > 0 && o.train_fraction < 1)) {
    throw std::invalid_argument("language model job: train_fraction must lie in (0, 1), got " + format_number(o.train_fraction));
  }
  int_in("eval_windows", o.eval_windows, 1, int64_t{1} << 20);
  int_in("sample_tokens", o.sample_tokens, 0, int64_t{1} << 20);
  int_in("eval_stride", o.eval_stride, 0, kMaxBlockSize);
}

LanguageModelJob::LanguageModelJob(LanguageModel& model, Tokenizer tokenizer, const std::vector<int64_t>& tokens,
                                   const LanguageModelJobOptions& options, const std::vector<CorpusPart>& corpus)
    : TrainingJob(model.family(), model, options.batch, model.vocab_size()),
      model_(model),
      tokenizer_(std::move(tokenizer)),
      options_(options),
      token_bytes_(tokenizer_.token_bytes()) {
  check_options();
  check_long_enough("whole", tokens.size(), block_);
  data_ = split_tokens(tokens, options_.train_fraction);
  check_long_enough("training part of the", data_.train.size(), block_);
  check_long_enough("validation part of the", data_.val.size(), block_);
  data_json_ = data_json(options_, tokens, corpus);
  eval_ = eval_batches(data_.val, {.batch = options_.batch, .block_size = block_}, options_.eval_windows);
  set_prompt(data_.train.front());
}

LanguageModelJob::LanguageModelJob(LanguageModel& model, Tokenizer tokenizer, ShardSet shards,
                                   const LanguageModelJobOptions& options)
    : TrainingJob(model.family(), model, options.batch, model.vocab_size()),
      model_(model),
      tokenizer_(std::move(tokenizer)),
      options_(options),
      token_bytes_(tokenizer_.token_bytes()),
      shards_(std::make_shared<const ShardSet>(std::move(shards))) {
  check_options();
  check_long_enough("training shards'", shards_->train.size(), block_);
  check_long_enough(shards_->val_is_tail ? "validation tail of the shards'" : "validation shards'", shards_->val.size(),
                    block_);
  data_json_ = shard_data_json(options_, *shards_);
  eval_ = shard_eval_batches(shards_->val, {.batch = options_.batch, .block_size = block_}, options_.eval_windows);
  int64_t first = 0;
  shards_->train.read(0, 1, &first);
  set_prompt(first);
}

void check_long_enough(const char* part, size_t tokens, int64_t block_size) {
  if (static_cast<int64_t>(tokens) < block_size + 1) {
    throw std::invalid_argument(std::string("language model job: the ") + part + " text has " + std::to_string(tokens) +
                                " tokens, fewer than block_size + 1 = " + std::to_string(block_size + 1) +
                                " (lower the block size or give more text)");
  }
}

int64_t window_length(const LanguageModelJobOptions& options, int64_t context_length) {
  return options.block_size != 0 ? options.block_size : context_length;
}

void check_against_model(const LanguageModelJobOptions& options, int64_t context_length) {
  if (options.block_size > context_length) {
    throw std::invalid_argument("language model job: block_size " + std::to_string(options.block_size) +
                                " is longer than the model's context of " + std::to_string(context_length) + " tokens");
  }
  const int64_t block = window_length(options, context_length);
  if (options.eval_stride > block) {
    throw std::invalid_argument("language model job: eval_stride " + std::to_string(options.eval_stride) +
                                " is longer than the window, block_size " + std::to_string(block) +
                                ": the tokens between two windows would not be scored");
  }
}

void LanguageModelJob::check_options() {
  validate(options_);
  // A model's table may be longer than its tokenizer's vocabulary (Hugging Face's models pad it:
  // Qwen3's 151,936 rows for 151,669 tokens); the rows past it are never a target.
  if (model_.vocab_size() < tokenizer_.vocab_size()) {
    throw std::invalid_argument("language model job: the model's vocab " + std::to_string(model_.vocab_size()) +
                                " is smaller than the " + tokenizer_.kind_name() + " tokenizer's " +
                                std::to_string(tokenizer_.vocab_size()));
  }
  check_against_model(options_, model_.context_length());
  block_ = window_length(options_, model_.context_length());
}

void LanguageModelJob::set_prompt(int64_t first_token) {
  try {
    prompt_ = tokenizer_.encode(options_.sample_prompt);
  } catch (const std::invalid_argument&) {
    prompt_.clear();
  }
  if (prompt_.empty() || static_cast<int64_t>(prompt_.size()) > block_) prompt_ = {first_token};
}

const std::vector<int64_t>& LanguageModelJob::validation_tokens(std::vector<int64_t>& held) const {
  if (!shards_) return data_.val;
  held = shards_->val.to_vector();
  return held;
}

StepLoss LanguageModelJob::loss(uint64_t index, const Shard& rows) {
  const int64_t block = block_;
  if (shards_) {
    // Only this rank's rows are read: each rank maps the set and copies its own windows.
    const TextBatch part = sequential_batch(shards_->train, {.batch = options_.batch, .block_size = block},
                                            static_cast<int64_t>(index), rows.begin, rows.rows);
    return {.loss = model_.loss(part.inputs, part.targets), .tokens = options_.batch * block};
  }
  const TextBatch batch = sample_batch(data_.train, {.batch = options_.batch, .block_size = block}, options_.seed, index);
  const bool whole = rows.begin == 0 && rows.rows == options_.batch;
  // The mean over B*T next-token predictions (the families compute it in chunks: GPT::loss).
  // Over several processes, this rank's rows of the batch (every rank draws the whole batch).
  const Variable loss = whole ? model_.loss(batch.inputs, batch.targets)
                              : model_.loss(shard_rows(batch.inputs, rows), shard_rows(batch.targets, rows));
  return {.loss = loss, .tokens = options_.batch * block};
}

LanguageModelJob::HeldOutLoss LanguageModelJob::mean_loss(const std::vector<TextBatch>& batches, const Ranks& ranks) {
  double sum = 0;
  int64_t rows = 0, tokens = 0, bytes = 0;
  for (const TextBatch& b : batches) {
    // Each batch's loss is a mean over its rows; weighting by rows makes the result the mean
    // over every validation token even when the last batch is short.
    const int64_t all = b.inputs.shape[0], block = b.inputs.shape[1];
    const Shard part = ranks.part(all);
    if (part.rows == 0) continue;
    const bool whole = part.rows == all;
    const Variable loss = whole ? model_.loss(b.inputs, b.targets)
                                : model_.loss(shard_rows(b.inputs, part), shard_rows(b.targets, part));
    sum += loss.item() * static_cast<double>(part.rows);
    rows += part.rows;
    tokens += part.rows * block;
    // The text this rank's rows predict: the bytes of their targets.
    const auto first = b.targets.data.begin() + static_cast<std::ptrdiff_t>(part.begin * block);
    const auto last = first + static_cast<std::ptrdiff_t>(part.rows * block);
    for (auto t = first; t != last; ++t) bytes += token_bytes_[static_cast<size_t>(*t)];
  }
  if (ranks.size() > 1) {
    std::vector<double> v{sum, static_cast<double>(rows), static_cast<double>(tokens), static_cast<double>(bytes)};
    ranks.sum(v);
    sum = v[0];
    rows = static_cast<int64_t>(v[1]);
    tokens = static_cast<int64_t>(v[2]);
    bytes = static_cast<int64_t>(v[3]);
  }
  const double loss = sum / static_cast<double>(rows);
  // total nats / ln 2 / total bytes, with total nats = loss * tokens. Written as the loss times
  // tokens / bytes, so that where every token is one byte the ratio is exactly 1 and the figure
  // exactly loss / ln 2.
  const double bits_per_byte = loss * (static_cast<double>(tokens) / static_cast<double>(bytes)) / std::log(2.0);
  return {.loss = loss, .bits_per_byte = bits_per_byte};
}

SplitLoss LanguageModelJob::evaluate_whole_split(const Ranks& ranks) {
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(model_);
  std::vector<int64_t> held;
  const std::vector<TextBatch> batches =
      tiled_batches(validation_tokens(held), {.batch = options_.batch, .block_size = block_});
  int64_t windows = 0;
  for (const TextBatch& b : batches) windows += b.inputs.shape[0];
  const HeldOutLoss held_out = mean_loss(batches, ranks);
  return {.loss = held_out.loss, .bits_per_byte = held_out.bits_per_byte, .windows = windows};
}

Evaluation LanguageModelJob::evaluate(const Ranks& ranks) {
  Evaluation e;
  const HeldOutLoss held_out = mean_loss(eval_, ranks);
  e.loss = held_out.loss;
  e.bits_per_byte = held_out.bits_per_byte;
  std::ostringstream line;
  line.setf(std::ios::fixed);
  line.precision(4);
  line << "validation loss " << e.loss << " (" << e.bits_per_byte << " bits per byte)";
  if (options_.eval_stride > 0) {
    std::vector<int64_t> held;
    const TextScore s =
        sliding_window_perplexity(model_, validation_tokens(held), token_bytes_,
                                  {.window = block_, .stride = options_.eval_stride, .batch = options_.batch}, ranks);
    e.sliding_loss = s.nats_per_token();
    e.sliding_bits_per_byte = s.bits_per_byte();
    // A line of its own, shown on and off a terminal (the progress line has room for one loss).
    std::ostringstream sliding;
    sliding.setf(std::ios::fixed);
    sliding.precision(4);
    sliding << "    sliding windows, stride " << options_.eval_stride << ": " << e.sliding_loss << " nats per token = "
            << e.sliding_bits_per_byte << " bpb, perplexity " << s.perplexity();
    e.details.push_back(sliding.str());
  }
  e.summary = line.str();
  // Over several processes only rank 0 shows a sample.
  const std::string text = ranks.rank() == 0 ? sample() : std::string();
  // Indented line by line, so the sample stands apart from the progress lines. (A prompt of
  // "\n" would open with an empty line: skipped.)
  const size_t first = text.find_first_not_of('\n');
  std::istringstream lines(first == std::string::npos ? std::string() : text.substr(first));
  for (std::string l; std::getline(lines, l);) e.details.push_back("    | " + l);
  return e;
}

std::string LanguageModelJob::sample() {
  if (options_.sample_tokens == 0) return {};
  // generate() runs in eval mode (no dropout, so no draws from the default generator) and
  // samples from its own counter-based stream; the guard keeps even that assumption out of the
  // trajectory.
  GeneratorStateGuard keep_generator;
  GenerateOptions g;
  g.max_new_tokens = options_.sample_tokens;
  g.sampling = {.temperature = 0.8, .top_k = 40, .top_p = 1.0, .seed = options_.seed};
  g.vocab_limit = tokenizer_.vocab_size();  // a base's table may be longer than its tokenizer
  return tokenizer_.decode(prompt_) + tokenizer_.decode(model_.generate(prompt_, g));
}

std::map<std::string, std::string> LanguageModelJob::metadata() const {
  std::map<std::string, std::string> m{
      {"model", model_.options_json()}, {"tokenizer", tokenizer_.to_json()}, {"data", data_json_}};
  if (!options_.finetune.empty()) m["finetune"] = options_.finetune;
  return m;
}

LanguageModelJobOptions lm_job_options_from(const Checkpoint& ck, const std::string& family,
                                            const LanguageModelJobOptions& base) {
  return parse_entry(require_model_kind(ck, family), "data",
                     [&](const std::string& s) { return data_options_from_json(s, base); });
}

bool lm_data_names_corpus(const Checkpoint& ck, const std::string& family) {
  return parse_entry(require_model_kind(ck, family), "data",
                     [](const std::string& s) { return parse_json(s).contains("corpus"); });
}

std::string lm_data_sources(const Checkpoint& ck, const std::string& family) {
  return parse_entry(require_model_kind(ck, family), "data", [](const std::string& s) {
    const Json j = parse_json(s);
    const auto corpus = j.find("corpus");
    if (corpus == j.end() || !corpus->is_array() || corpus->empty()) return std::string();
    std::string names, sizes;
    for (const Json& part : *corpus) {
      if (!part.is_object() || !part.contains("name") || !part.contains("bytes")) return std::string();
      names += (names.empty() ? "" : " + ") + part["name"].get<std::string>();
      sizes += (sizes.empty() ? "" : " + ") + part["bytes"].dump();
    }
    return names + " (" + sizes + " bytes)";
  });
}
}  // namespace ag
