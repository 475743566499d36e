#include "attograd/models/llama/llama_load.h"

#include <filesystem>
#include <stdexcept>

#include "attograd/core/rng.h"
#include "attograd/core/skip_init.h"
#include "attograd/models/llama/llama_finetune.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/trainer.h"

namespace ag {

using namespace memory;

LlamaOptions llama_options_from(const Checkpoint& ck) {
  require_model_kind(ck, "llama");
  const LlamaOptions model = ck.parse_entry("model", [&](const std::string& text) {
    return llama_options_from_hf_json(text, ck.path() + " (its model entry)");
  });
  const Tokenizer tokenizer = ck.parse_entry("tokenizer", Tokenizer::from_json);
  // A fine-tuned Hugging Face model keeps its padded table: at least the tokenizer's ids.
  if (model.vocab < tokenizer.vocab_size()) {
    throw std::runtime_error("checkpoint '" + ck.path() + "': the model's vocab " + std::to_string(model.vocab) +
                             " is smaller than its tokenizer's " + std::to_string(tokenizer.vocab_size()));
  }
  return model;
}

Tokenizer llama_tokenizer_from(const Checkpoint& ck) {
  return require_model_kind(ck, "llama").parse_entry("tokenizer", Tokenizer::from_json);
}

LoadedLlama load_llama_checkpoint(const Checkpoint& ck) {
  const LlamaOptions options = llama_options_from(ck);
  // The model entry decides what is allocated: a file whose entry describes a model larger than
  // this machine is refused before anything is built.
  MemoryEstimate need;
  need.parameters = static_cast<double>(llama_parameter_count(options)) * kFloat;
  try {
    check_memory_fits(need, available_memory_bytes(), "the model is the checkpoint's own (its model entry)");
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("checkpoint '" + ck.path() + "': " + e.what());
  }
  LoadedLlama out;
  out.step = static_cast<int64_t>(ck.info().data_position);
  {
    // Every weight is read from the file: none is drawn, the caller's stream stays where it was.
    GeneratorStateGuard keep_generator;
    SkipInitGuard no_init;
    out.model = std::make_unique<Llama>(options);
  }
  // A fine-tuning run's adapters (and, for an adapter alone, its base read again).
  restore_finetune(ck, *out.model);
  ck.load(holds_trainable_only(ck) ? out.model->trainable_parameters() : out.model->named_parameters());
  out.model->eval();
  out.tokenizer = llama_tokenizer_from(ck);
  return out;
}

LoadedLlama load_llama_checkpoint(const std::string& path) { return load_llama_checkpoint(Checkpoint::open(path)); }

bool is_llama_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  try {
    const SafetensorsIndex index = index_safetensors(FileReader(path));
    const auto kind = index.metadata.find("model_kind");
    return kind != index.metadata.end() && kind->second == "llama";
  } catch (const std::exception&) {
    return false;
  }
}

MemoryEstimate estimate_llama_training_memory(const LlamaOptions& given, int64_t batch, int64_t block_size,
                                              const TrainerOptions& trainer, const FineTuneOptions& finetune) {
  const LlamaOptions m = resolved(given);
  const double d = static_cast<double>(m.d_model), t = static_cast<double>(block_size);
  const double heads = static_cast<double>(m.n_head), vocab = static_cast<double>(m.vocab);
  const double q = static_cast<double>(m.n_head * m.head_dim), kv = static_cast<double>(m.n_kv_head * m.head_dim);
  // The SwiGLU keeps gate, up and their product: counted as a feed-forward 1.5 times as wide.
  const double ff = 1.5 * static_cast<double>(m.d_hidden);
  const double block = block_activation_values(d, ff, heads, t, q, kv);
  const double per_token = blocks_kept(static_cast<double>(m.n_layers), block, d, trainer.recompute) + 2 * d + 3 * vocab;
  const double activations = 1.5 * static_cast<double>(batch) * t * per_token * kFloat;
  const double evaluation = static_cast<double>(batch) * t * (block + 2 * vocab) * kFloat;
  const int64_t adapters = llama_lora_parameter_count(m, finetune);
  MemoryEstimate need =
      estimate(static_cast<double>(llama_parameter_count(m) + adapters), activations, evaluation, batch, trainer);
  if (finetune.lora_rank > 0) {
    // Only the adapters train: the base gets neither gradients nor optimizer state.
    const MemoryEstimate tuned = estimate(static_cast<double>(adapters), 0, 0, batch, trainer);
    need.gradients = tuned.gradients;
    need.optimizer_state = tuned.optimizer_state;
  }
  return need;
}

}  // namespace ag
