#include "attograd/models/gpt/gpt_load.h"

#include <filesystem>
#include <stdexcept>

#include "attograd/core/rng.h"
#include "attograd/core/skip_init.h"
#include "attograd/models/gpt/finetune.h"
#include "attograd/models/gpt/gpt_memory.h"
#include "attograd/models/gpt/gpt_options.h"
#include "attograd/text/bpe.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/trainer.h"

namespace ag {

GPTOptions gpt_options_from(const Checkpoint& ck) {
  require_model_kind(ck, "gpt");
  // Checkpoints written before the one training loop kept the model's options under "gpt".
  const GPTOptions model = parse_entry(ck, ck.has_entry("model") ? "model" : "gpt", gpt_options_from_json);
  const Tokenizer tokenizer = parse_entry(ck, "tokenizer", Tokenizer::from_json);
  if (model.vocab != tokenizer.vocab_size()) {
    throw std::runtime_error("checkpoint '" + ck.path() + "': the model's vocab " + std::to_string(model.vocab) +
                             " differs from its tokenizer's " + std::to_string(tokenizer.vocab_size()));
  }
  return model;
}

Tokenizer gpt_tokenizer_from(const Checkpoint& ck) {
  return parse_entry(require_model_kind(ck, "gpt"), "tokenizer", Tokenizer::from_json);
}

LoadedGPT load_gpt_checkpoint(const Checkpoint& ck) {
  const GPTOptions options = gpt_options_from(ck);
  // The model entry decides what is allocated: a file whose entry describes a model larger than
  // this machine is refused with an estimate before anything is built (its tensors may be tiny).
  MemoryEstimate need;
  need.parameters = parameter_count(options) * static_cast<double>(sizeof(float));
  try {
    check_memory_fits(need, available_memory_bytes(),
                      "the model is the checkpoint's own (its model entry: " + gpt_options_to_json(options) + ")");
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("checkpoint '" + ck.path() + "': " + e.what());
  }
  LoadedGPT out;
  out.step = static_cast<int64_t>(ck.info().data_position);  // the updates the run had made
  {
    // Every weight is about to be read from the file: none is drawn, and the caller's stream
    // is left where it was.
    GeneratorStateGuard keep_generator;
    SkipInitGuard no_init;
    out.model = std::make_unique<GPT>(options);
  }
  restore_finetune(ck, *out.model);
  // The tied head reads embed.weight, the one tensor the file holds for both uses.
  ck.load(holds_trainable_only(ck) ? out.model->trainable_parameters() : out.model->named_parameters());
  out.model->eval();
  out.tokenizer = gpt_tokenizer_from(ck);
  return out;
}

LoadedGPT load_gpt_checkpoint(const std::string& path) { return load_gpt_checkpoint(Checkpoint::open(path)); }

namespace {

Tokenizer tokenizer_for(const std::string& weights, const std::string& hint, int64_t vocab) {
  Tokenizer t = Tokenizer::bytes();
  if (hint.empty()) {
    if (vocab != 50257) {
      throw std::invalid_argument("GPT weights '" + weights + "' read " + std::to_string(vocab) +
                                  " tokens and say nothing of their tokenizer: give --tokenizer (byte, gpt2 or a "
                                  "vocabulary file of train_bpe); GPT-2's 50257 is assumed only for its own size");
    }
    t = Tokenizer::bpe(BytePairEncoding::gpt2());
  } else if (hint == "gpt2") {
    t = Tokenizer::bpe(BytePairEncoding::gpt2());
  } else if (hint != "byte") {
    t = Tokenizer::bpe(BytePairEncoding::load(hint));
  }
  if (t.vocab_size() != vocab) {
    throw std::invalid_argument("--tokenizer " + hint + " has " + std::to_string(t.vocab_size()) + " tokens, the weights '" +
                                weights + "' " + std::to_string(vocab));
  }
  return t;
}

}  // namespace

LoadedGPTFile load_gpt(const std::string& path, const GPTFileHints& hints) {
  namespace fs = std::filesystem;
  LoadedGPTFile out;
  out.weights = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    out.weights = (fs::path(path) / "model.safetensors").string();
    if (!fs::is_regular_file(out.weights, ec)) {
      throw std::runtime_error("'" + path + "' is a directory without model.safetensors (a Hugging Face GPT-2 directory "
                               "holds model.safetensors and config.json)");
    }
  }
  out.layout = gpt_weights_layout(out.weights);
  if (out.layout == GPTWeightsLayout::attograd) {
    if (!hints.empty()) {
      throw std::invalid_argument("'" + out.weights + "' is an attograd checkpoint: its model and tokenizer are its own "
                                  "(--tokenizer, --heads and --activation are for other tools' files)");
    }
    out.gpt = load_gpt_checkpoint(out.weights);
    return out;
  }
  const fs::path config = fs::path(out.weights).parent_path() / "config.json";
  const bool has_config = out.layout != GPTWeightsLayout::llmc && fs::is_regular_file(config, ec);
  const GPTFileShape shape =
      gpt_shape_of_weights(out.weights, has_config ? config.string() : "", hints.n_head, hints.activation);
  out.shape_from = "heads from " + shape.heads_from + ", activation from " + shape.activation_from;
  MemoryEstimate need;
  need.parameters = parameter_count(shape.options) * static_cast<double>(sizeof(float));
  try {
    check_memory_fits(need, available_memory_bytes(), "the model is the file's own");
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("GPT weights '" + out.weights + "': " + e.what());
  }
  if (hints.need_tokenizer) out.gpt.tokenizer = tokenizer_for(out.weights, hints.tokenizer, shape.options.vocab);
  {
    // Every weight is read from the file: none is drawn, the caller's stream stays where it was.
    GeneratorStateGuard keep_generator;
    SkipInitGuard no_init;
    out.gpt.model = std::make_unique<GPT>(shape.options);
  }
  read_gpt_weights(*out.gpt.model, out.weights);
  out.gpt.model->eval();
  return out;
}

}  // namespace ag
