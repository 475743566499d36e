// The command line of tools/train_gpt: its data, model and batch flags on top of the flags
// and config-file handling every training program shares (training_program.h). Its defaults
// train the "baby" model with AdamW and a cosine decay.
//
//   TrainGPTArgs args = parse_training_args<TrainGPTArgs>({"--steps", "300", "--d-model", "64"});
//   TrainGPTArgs args = parse_training_args<TrainGPTArgs>({"--config", "gpt.toml"});
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attograd/models/gpt/finetune.h"
#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_job.h"
#include "attograd/models/llama/llama.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/models/llama/llama_load.h"
#include "common/training_program.h"

namespace ag {

struct TrainGPTArgs : TrainingArgs {
  // A run's directory is runs/train_gpt/<the text's name>/<n>, its checkpoint ckpt.safetensors
  // there (generate's README command reads runs/train_gpt/fortunes/latest/ckpt.safetensors).
  static constexpr ProgramInfo kInfo{
      .name = "train_gpt", .holds = "model, tokenizer", .outputs = "<text>", .target = false, .saves = true};

  // Files or corpus names (is_corpus_name: fortunes, bible), joined in order
  // (read_corpus_sources); none: Debian's fortunes.
  std::vector<std::string> data;
  std::string tokenizer = "char";  // char | byte | gpt2 | a vocabulary file written by train_bpe
  bool tokenizer_given = false;    // --tokenizer on the command line or in the config
  std::string shard_format = "headed";  // headed | nanogpt (token_shards.h's ShardFormat)
  // The "baby" model: 4 layers, 4 heads, d_model 128, a context of 64 characters. vocab follows
  // the tokenizer.
  GPTOptions model{.vocab = 0, .block_size = 64, .d_model = 128, .n_head = 4, .n_layers = 4, .dropout = 0.0,
                   .bias = true};
  std::string preset;        // gpt_preset's name (flags given beside it win) or llama_preset's
  // The family the run trains: "gpt", or "llama" for a Llama preset or a Llama-family base of
  // --init-from (the shape is the preset's or the base's; --block-size is the training window).
  // A resumed run's is its checkpoint's.
  std::string family = "gpt";
  std::string activation;    // --activation; empty: the preset's, else the exact GELU
  GPTJobOptions job;  // batch 32; seed = --seed
  bool eval_full = false;  // at the end, the loss over the whole validation split
  // --init-from, --freeze, --lora-*, --save-adapter-only (train/finetune.h). LoRA's default
  // targets are the family's four attention projections of every block; --lora-targets replaces
  // them.
  FineTuneOptions finetune;
  std::vector<std::string> lora_targets;  // empty: the family's default

  TrainGPTArgs() {
    // The default run: under 5 minutes on two quiet cores to a validation loss below 2.0 nats per
    // character on fortunes (docs/programs/train_gpt.md says how it was chosen). A short
    // context makes each token cheap; nanoGPT's recipe for small models (beta2 0.99, no decay of
    // biases, norms and tables) with a learning rate raised for the short budget.
    trainer = {.optimizer = OptimizerKind::adamw, .lr = 3e-3, .min_lr = 3e-4, .weight_decay = 0.1,
               .decay = DecayParams::matrices, .beta2 = 0.99, .warmup_steps = 50, .schedule = LrDecay::cosine,
               .steps = 1000, .clip_norm = 1.0, .eval_every = 100};
  }

  void declare(Flags& f) {
    f.app().description(
        "Trains a small GPT on a text, character by character (or byte by byte), and prints samples as it "
        "learns.\nThe defaults train the 'baby' model (4 layers, 4 heads, d_model 128, context 64) on Debian's "
        "fortunes in under 5 minutes on two cores.\nThe validation loss is shown in nats per token and in bits per "
        "byte of text, which compares runs with different tokenizers.\n--preset llama-tiny trains a Llama-family model "
        "(RMSNorm, rotary positions, SwiGLU, grouped-query attention) instead, on bytes.");
    f.group("data", false);
    f.paths("--data", data,
            "text to learn: one or more files, joined in order (a newline between two where the first does not "
            "end with one), or a named corpus: fortunes (the default, Debian's fortunes) or bible (Debian's King "
            "James Bible, one verse a line); ./NAME is a file so named. Token shards instead: directories or *.bin "
            "files (prepare_text's, which name their tokenizer; llm.c's and nanoGPT's need --tokenizer), read in order, "
            "*val* files validating",
            is_corpus_name)->expected(1, CLI::detail::expected_max_vector_size);
    f.choice("--shard-format", shard_format,
             "how token shards are told apart: headed (prepare_text's or llm.c's header, the default) or nanogpt "
             "(files without a header are also read, as nanoGPT's raw uint16 tokens)",
             {"headed", "nanogpt"});
    f.group("data", true);
    // A vocabulary file given in a config is relative to the config, as every path there is.
    f.path("--tokenizer", tokenizer,
           "one token per UTF-8 character (char), per byte (byte), GPT-2's byte-pair encoding (gpt2), a "
           "vocabulary file written by train_bpe, or a Hugging Face tokenizer.json (a name ending in .json)",
           [](const std::string& v) { return v == "char" || v == "byte" || v == "gpt2"; });
    f.group("model", true);
    f.choice("--preset", preset,
             "GPT-2's shape: gpt2 (124M), gpt2-medium (350M) or gpt2-tiny (for tests), with GPT-2's tokenizer unless "
             "--tokenizer says otherwise and the flags below, when given, winning; or a Llama-family shape: llama-tiny "
             "(4 layers, d_model 128, 4 heads over 2, byte tokens unless --tokenizer says otherwise), smollm2-135m, "
             "qwen3-0.6b, llama3.2-1b (these need --tokenizer, e.g. their tokenizer.json); the vocabulary follows the "
             "tokenizer and --block-size is the training window",
             preset_names());
    f.integer("--layers", model.n_layers, 1, GPTLimits::n_layers, "transformer blocks");
    f.integer("--heads", model.n_head, 1, GPTLimits::n_head, "attention heads, must divide --d-model");
    f.integer("--d-model", model.d_model, 1, GPTLimits::d_model, "width");
    f.integer("--block-size", model.block_size, 1, GPTLimits::block_size, "context length in tokens");
    f.real("--dropout", model.dropout, 0.0, 1.0, "dropout probability", true);
    f.flag("--bias,!--no-bias", model.bias, "biases in the attention projections and the MLP (LayerNorms keep theirs)");
    f.choice("--activation", activation, "the MLP's GELU: gelu (exact, the default) or gelu_tanh (GPT-2's approximation)",
             {"gelu", "gelu_tanh"});
    f.integer("--vocab-multiple", model.vocab_multiple, 1, GPTLimits::vocab_multiple,
              "pad the token table to a multiple of this many rows (llm.c pads GPT-2's to 50304); invisible otherwise");
    f.group("optimisation", true);
    f.integer("--batch", job.batch, 1, int64_t{1} << 20, "windows per step");
    f.group("evaluation and output", false);
    f.integer("--eval-windows", job.eval_windows, 1, int64_t{1} << 20,
              "validation windows per evaluation, evenly spaced (at most; rounded down to whole batches)");
    f.flag("--eval-full", eval_full, "at the end, the validation loss over the whole split (every window)");
    f.integer("--eval-stride", job.eval_stride, 0, GPTLimits::block_size,
              "at every evaluation, also the sliding-window perplexity of the whole validation split: windows of "
              "--block-size tokens every N tokens, each token scored once (at most --block-size; 0: none)");
    f.group("fine-tuning", true);
    f.path("--init-from", finetune.init_from,
           "start from these weights: a checkpoint of train_gpt (its model and tokenizer are the run's), a Hugging "
           "Face GPT-2 model.safetensors, nanoGPT's state_dict as safetensors, or llm.c's .bin (told from the "
           "content; the model flags or --preset must describe it); or a Hugging Face directory of the Llama family "
           "(Llama, Qwen2/3, Mistral, SmolLM: config.json gives the shape, its tokenizer.json is the run's unless "
           "--tokenizer names another)");
    f.words("--freeze", finetune.freeze,
            "leave these parameters as they are: a glob over the dotted name ('blocks.*.attn.*'), or a leading "
            "part of it ('embed', 'blocks.0'); repeatable")->expected(1, CLI::detail::expected_max_vector_size);
    f.integer("--lora-rank", finetune.lora_rank, 0, int64_t{1} << 16,
              "train LoRA adapters of this rank on the --lora-targets and freeze everything else (0: no LoRA)");
    f.real("--lora-alpha", finetune.lora_alpha, 0.0, 1e6, "the adapters' update is scaled by alpha / rank (0: the rank)");
    f.words("--lora-targets", lora_targets,
            "the Linear layers that get adapters, by name or dotted suffix: a GPT's w_q w_k w_v w_o (the default) "
            "linear1 linear2; a Llama's q_proj k_proj v_proj o_proj (the default) gate_proj up_proj down_proj")->expected(1, CLI::detail::expected_max_vector_size);
    f.flag("--save-adapter-only", finetune.adapter_only,
           "checkpoints hold only the trained parameters (and the base's path and checksum): needs --init-from");
  }

  // --init-from DIR, a Hugging Face GPT-2 directory: its config.json decides the model's shape
  // (a flag that says otherwise is refused, naming both), and model.safetensors is the file read.
  void from_hf_directory(const CommandLine& line) {
    namespace fs = std::filesystem;
    const fs::path dir(finetune.init_from);
    const std::string weights = (dir / "model.safetensors").string(), config = (dir / "config.json").string();
    std::error_code ec;
    if (!fs::is_regular_file(weights, ec)) {
      throw UsageError("--init-from: the directory '" + dir.string() + "' holds no model.safetensors (a Hugging Face "
                       "GPT-2 directory holds model.safetensors and config.json)");
    }
    finetune.init_from = weights;
    if (!fs::is_regular_file(config, ec)) return;  // the flags or --preset describe the model, as for a file
    GPTOptions c;
    try {
      c = gpt_options_from_hf_config(config);
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("--init-from: ") + e.what());
    }
    const auto agree = [&](const char* flag, int64_t given, int64_t file, const char* key) {
      if (line.given(flag) && given != file) {
        throw UsageError(std::string(flag) + " " + std::to_string(given) + " contradicts " + config + ": its " + key + " is " +
                         std::to_string(file));
      }
    };
    agree("--layers", model.n_layers, c.n_layers, "n_layer");
    agree("--heads", model.n_head, c.n_head, "n_head");
    agree("--d-model", model.d_model, c.d_model, "n_embd");
    if (line.given("--block-size") && model.block_size > c.block_size) {
      throw UsageError("--block-size " + std::to_string(model.block_size) + " contradicts " + config + ": its n_positions is " +
                       std::to_string(c.block_size) + " (a shorter context takes the first positions; a longer one has none)");
    }
    if (!activation.empty() && model.activation != c.activation) {
      throw UsageError("--activation " + activation + " contradicts " + config + ": its activation_function is " +
                       activation_name(c.activation));
    }
    if (line.given("--bias") && !model.bias) throw UsageError("--no-bias contradicts " + config + ": GPT-2 has biases");
    model.n_layers = c.n_layers, model.n_head = c.n_head, model.d_model = c.d_model, model.activation = c.activation;
    model.bias = true;
    if (!line.given("--block-size")) model.block_size = c.block_size;
    // GPT-2's vocabulary, unless the user names the tokenizer of their model.
    if (!line.given("--tokenizer") && c.vocab == 50257) tokenizer = "gpt2";
  }

  static std::vector<std::string> preset_names() {
    std::vector<std::string> names = gpt_preset_names();
    for (const std::string& n : llama_preset_names()) names.push_back(n);
    return names;
  }
  static bool is_llama_preset(const std::string& name) {
    for (const std::string& n : llama_preset_names()) {
      if (n == name) return true;
    }
    return false;
  }

  // A Llama preset: the shape is the preset's, so GPT's shape flags are refused by name;
  // --block-size is the window the job trains on (the preset's context when shorter than 256,
  // else 256), and llama-tiny reads bytes unless --tokenizer says otherwise.
  void finish_llama(const CommandLine& line) {
    family = "llama";
    for (const char* flag : {"--layers", "--heads", "--d-model", "--dropout", "--bias", "--no-bias", "--activation",
                             "--vocab-multiple"}) {
      if (line.typed(flag)) {
        throw UsageError(std::string(flag) + " shapes a GPT; --preset " + preset +
                         " gives the Llama family's whole shape (only --block-size, the training window, goes with it)");
      }
    }
    if (!finetune.init_from.empty()) {
      throw UsageError("--init-from " + finetune.init_from + " is not a Llama-family base (a Hugging Face directory of " +
                       "Llama, Qwen2/3 or Mistral, or a checkpoint of a Llama-family run); --preset " + preset +
                       " trains from scratch");
    }
    const LlamaOptions p = llama_preset(preset);
    set_window(line, p.max_positions, "--preset " + preset + "'s");
    if (!line.given("--tokenizer")) {
      if (p.vocab != 256) {
        throw UsageError("--preset " + preset + " reads " + std::to_string(p.vocab) +
                         " tokens: give its tokenizer with --tokenizer (its tokenizer.json)");
      }
      tokenizer = "byte";
    }
  }

  // --block-size is the window the job trains on, within the model's context (`whose`: the
  // context's owner in a message); without it, the context when shorter than 256, else 256.
  void set_window(const CommandLine& line, int64_t context, const std::string& whose) {
    if (line.given("--block-size")) {
      if (model.block_size > context) {
        throw UsageError("--block-size " + std::to_string(model.block_size) + " is longer than " + whose +
                         " context of " + std::to_string(context) + " tokens");
      }
      job.block_size = model.block_size;
    } else {
      job.block_size = std::min<int64_t>(context, 256);
    }
  }

  // Whether --init-from names a base of the Llama family: a Hugging Face directory of it, or a
  // checkpoint of a Llama-family run.
  bool llama_base() const {
    return !finetune.init_from.empty() &&
           (is_llama_hf_directory(finetune.init_from) || is_llama_checkpoint(finetune.init_from));
  }

  // --init-from a Llama-family base: its config.json (or the checkpoint's model entry) is the
  // shape, so GPT's shape flags and --preset are refused by name; the directory's tokenizer.json
  // is the run's unless --tokenizer names another (a checkpoint's own is, always).
  void finish_llama_base(const CommandLine& line) {
    namespace fs = std::filesystem;
    family = "llama";
    const bool directory = fs::is_directory(finetune.init_from);
    const std::string shape_source = directory ? (fs::path(finetune.init_from) / "config.json").string()
                                               : finetune.init_from + " (a checkpoint)";
    for (const char* flag : {"--layers", "--heads", "--d-model", "--dropout", "--bias", "--no-bias", "--activation",
                             "--vocab-multiple", "--preset"}) {
      if (line.typed(flag)) {
        throw UsageError(std::string(flag) + " cannot go with --init-from " + finetune.init_from + ": " + shape_source +
                         " gives the model's whole shape (only --block-size, the training window, goes with it)");
      }
    }
    LlamaOptions base;
    try {
      base = directory ? llama_options_from_hf_config(shape_source) : llama_options_from(Checkpoint::open(finetune.init_from));
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("--init-from: ") + e.what());
    }
    set_window(line, base.max_positions, shape_source + "'s");
    if (!directory) {
      if (line.typed("--tokenizer")) {
        throw UsageError("--tokenizer cannot go with --init-from " + finetune.init_from +
                         ": a checkpoint's model and tokenizer are the run's");
      }
    } else if (!line.given("--tokenizer")) {
      const fs::path json = fs::path(finetune.init_from) / "tokenizer.json";
      std::error_code ec;
      if (!fs::is_regular_file(json, ec)) {
        throw UsageError("--init-from: the directory '" + finetune.init_from +
                         "' has no tokenizer.json; name one with --tokenizer (byte for a model of 256 byte tokens)");
      }
      tokenizer = json.string();
      inputs.push_back({"--tokenizer", tokenizer});
    }
    inputs.push_back({"--init-from", finetune.init_from});
  }

  void finish(const CommandLine& line) {
    job.seed = seed;
    tokenizer_given = line.given("--tokenizer");
    if (llama_base()) {
      finish_llama_base(line);
    } else if (is_llama_preset(preset)) {
      finish_llama(line);
    } else if (!preset.empty()) {
      // The preset fills what the flags leave unsaid.
      const GPTOptions p = gpt_preset(preset);
      if (!line.given("--layers")) model.n_layers = p.n_layers;
      if (!line.given("--heads")) model.n_head = p.n_head;
      if (!line.given("--d-model")) model.d_model = p.d_model;
      if (!line.given("--block-size")) model.block_size = p.block_size;
      if (!line.given("--dropout")) model.dropout = p.dropout;
      if (!line.given("--bias")) model.bias = p.bias;  // --no-bias is the same option
      if (activation.empty()) model.activation = p.activation;
      if (!line.given("--tokenizer")) tokenizer = "gpt2";
    }
    if (!activation.empty()) model.activation = line.choice("--activation", parse_activation, activation);
    if (family == "gpt" && !finetune.init_from.empty() && std::filesystem::is_directory(finetune.init_from)) {
      from_hf_directory(line);
    }
    for (const std::string& source : data) {
      if (!is_corpus_name(source)) inputs.push_back({"--data", source});
    }
    if (line.given("--tokenizer") && tokenizer != "char" && tokenizer != "byte" && tokenizer != "gpt2") {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(tokenizer, ec)) {
        throw UsageError("--tokenizer: '" + tokenizer +
                         "' is not char, byte, gpt2, a vocabulary file written by train_bpe or a tokenizer.json (no such "
                         "file)");
      }
      inputs.push_back({"--tokenizer", tokenizer});
    }
    if (!line.resuming && family == "gpt") check_heads(model.d_model, model.n_head);
    if (line.typed("--lora-rank") && finetune.lora_rank == 0) {
      throw UsageError("--lora-rank: 0 is no rank; an adapter has rank 1 or more (leave the flag out for no LoRA)");
    }
    if (!lora_targets.empty()) finetune.lora_targets = lora_targets;
    if (finetune.lora_rank == 0) {
      for (const char* flag : {"--lora-alpha", "--lora-targets"}) {
        if (line.typed(flag)) throw UsageError(std::string(flag) + " needs --lora-rank");
      }
    }
    if (finetune.adapter_only && finetune.init_from.empty() && !line.resuming) {
      throw UsageError("--save-adapter-only needs --init-from: an adapter is saved against the base it adapts");
    }
    if (finetune.adapter_only && finetune.lora_rank == 0 && finetune.freeze.empty() && !line.resuming) {
      throw UsageError("--save-adapter-only needs --lora-rank or --freeze: otherwise every parameter trains");
    }
    if (!finetune.init_from.empty() && family == "gpt") {
      // A checkpoint of ours decides the model and the tokenizer; the other layouts hold weights only.
      std::error_code ec;
      const bool ours = std::filesystem::is_regular_file(finetune.init_from, ec) &&
                        gpt_weights_layout(finetune.init_from) == GPTWeightsLayout::attograd;
      for (const char* flag : {"--layers", "--heads", "--d-model", "--block-size", "--dropout", "--bias", "--no-bias",
                               "--tokenizer", "--preset", "--activation", "--vocab-multiple"}) {
        if (ours && line.typed(flag)) {
          throw UsageError(std::string(flag) + " cannot go with --init-from " + finetune.init_from +
                           ": a checkpoint's model and tokenizer are the run's");
        }
      }
      inputs.push_back({"--init-from", finetune.init_from});
    }
  }
};

}  // namespace ag
