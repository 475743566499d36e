// export_gpt: writes a GPT trained here in a layout other tools read: Hugging Face's GPT-2
// (a directory with model.safetensors and config.json, for transformers' GPT2LMHeadModel) or
// llm.c's .bin (version 3, float32). models/gpt/gpt_weights.h says what each holds. The input may
// also be another tool's weights (models/gpt/gpt_load.h), to convert between the layouts:
//   build/tools/export_gpt --checkpoint gpt2/ --format llmc --out gpt2_124M.bin
//
//   build/tools/export_gpt --checkpoint runs/gpt/ckpt.safetensors --format hf --out gpt2-export
//   build/tools/export_gpt --checkpoint runs/gpt/ckpt.safetensors --format llmc --out model.bin
//
// A Llama-family checkpoint (train_gpt --preset llama-tiny, or a fine-tuning run of a Hugging Face
// directory) is written as a Hugging Face directory of its architecture (config.json,
// model.safetensors, and tokenizer.json when the run's tokenizer is a byte-pair encoding), which
// transformers' LlamaForCausalLM loads, in float32 or, with --dtype bf16, bfloat16; a Hugging
// Face directory of the family is converted the same way (its tokenizer.json copied as it is):
//   build/tools/export_gpt --checkpoint runs/train_gpt/fortunes/latest/ckpt.safetensors --format hf --out my-llama
//   build/tools/export_gpt --checkpoint SmolLM2-135M/ --format hf --dtype f32 --out smollm2-f32
//
// A fine-tuning run's LoRA adapters are merged into the weights they adapt (W + alpha/r B A), so
// the exported model computes what the checkpoint does. The tokenizer is not exported: a model
// trained with --tokenizer gpt2 reads GPT-2's, which the other tools have. A file that exists is
// replaced only with --overwrite; the checkpoint and its base weights never are. Exit codes: 0
// done, 1 error (a file, a model the format cannot express), 2 bad command line.
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "attograd/layers/lora.h"
#include "attograd/models/gpt/finetune.h"
#include "attograd/models/gpt/gpt_load.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/models/llama/llama_load.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/outputs.h"
#include "common/tool_main.h"
#include "common/weights_flags.h"

namespace {

using namespace ag;

struct Args {
  std::string checkpoint, format, out;
  std::string dtype = "f32";  // f32 | bf16 (the Llama family's exports)
  bool overwrite = false;
  GPTFileHints hints;  // for weights of another tool (the tokenizer is not needed)
};

// Every file of a Hugging Face directory, which an export must never replace.
void add_directory_inputs(std::vector<InputFile>& inputs, const std::string& role, const std::string& dir) {
  std::error_code ec;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) inputs.push_back({role, e.path().string(), InputKind::file});
  }
}

// A Llama-family checkpoint of train_gpt, or a Hugging Face directory of the family, written as a
// Hugging Face directory: config.json and model.safetensors (--dtype) for transformers'
// LlamaForCausalLM, and tokenizer.json when the run's tokenizer is a byte-pair encoding (a byte or
// character tokenizer has none to write) or the directory has one.
int export_llama(const Args& args) {
  if (args.format != "hf") {
    throw UsageError("--format " + args.format + ": '" + args.checkpoint +
                     "' holds a Llama-family model, which only the Hugging Face layout (hf) expresses");
  }
  if (!args.hints.empty()) {
    throw UsageError("--heads and --activation describe another tool's GPT-2 weights; '" + args.checkpoint +
                     "' is a checkpoint of train_gpt, which says all of it");
  }
  const std::filesystem::path out(args.out);
  std::vector<OutputFile> files;
  for (const char* name : {"model.safetensors", "config.json", "tokenizer.json"}) {
    files.push_back({"--out", (out / name).string(), OutputKind::file});
  }
  // The files read are never written: the checkpoint, or the directory, and an adapter-only
  // checkpoint's base (a file, or every file of its directory).
  const bool directory = is_llama_hf_directory(args.checkpoint);
  std::vector<InputFile> inputs;
  std::optional<Checkpoint> checkpoint;
  if (directory) {
    add_directory_inputs(inputs, "--checkpoint", args.checkpoint);
  } else {
    inputs.push_back({"--checkpoint", args.checkpoint, InputKind::file});
    checkpoint.emplace(Checkpoint::open(args.checkpoint));
    const std::string base = finetune_options_from(*checkpoint).init_from;
    if (std::filesystem::is_directory(base)) {
      add_directory_inputs(inputs, "the checkpoint's base weights", base);
    } else if (!base.empty()) {
      inputs.push_back({"the checkpoint's base weights", base, InputKind::file});
    }
  }
  const OutputLocks locks = [&] {
    try {
      return prepare_outputs(files, {.overwrite = args.overwrite, .inputs = inputs});
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }();
  std::unique_ptr<Llama> model;
  std::string tokenizer_json, no_tokenizer;  // the file to write, or why there is none
  if (directory) {
    model = load_llama_hf(args.checkpoint);
    const std::filesystem::path json = std::filesystem::path(args.checkpoint) / "tokenizer.json";
    if (std::filesystem::is_regular_file(json)) {
      tokenizer_json = read_file(json.string());
    } else {
      no_tokenizer = "the directory has none";
    }
  } else {
    LoadedLlama loaded = load_llama_checkpoint(*checkpoint);
    model = std::move(loaded.model);
    const std::string kind = loaded.tokenizer.kind_name();
    if (kind == "bpe" || kind == kHFTokenizerKind) {
      tokenizer_json = tokenizer_json_file(loaded.tokenizer);
    } else {
      no_tokenizer = "the run's " + kind + " tokenizer is not a byte-pair encoding";
    }
  }
  const bool bf16 = args.dtype == "bf16";
  write_llama_hf(*model, args.out, bf16 ? HfWeightsDType::bf16 : HfWeightsDType::f32);
  if (!tokenizer_json.empty()) {
    AtomicFile json((out / "tokenizer.json").string());
    json.write(tokenizer_json);
    json.commit();
  }
  const LlamaOptions& o = model->options();
  std::cout << "wrote " << args.out << "/model.safetensors and config.json"
            << (tokenizer_json.empty() ? "" : " and tokenizer.json") << ": " << llama_hf_architecture(o) << " "
            << o.n_layers << " layers, " << o.n_head << " heads over " << o.n_kv_head << ", d_model " << o.d_model
            << ", vocab " << o.vocab << ", " << model->num_parameters() << " parameters, "
            << (bf16 ? "bfloat16" : "float32");
  if (tokenizer_json.empty()) std::cout << "; no tokenizer.json: " << no_tokenizer;
  std::cout << "\n";
  return 0;
}

int run(const Args& args) {
  if (is_llama_checkpoint(args.checkpoint) || is_llama_hf_directory(args.checkpoint)) return export_llama(args);
  if (args.dtype != "f32") {
    throw UsageError("--dtype " + args.dtype + ": GPT-2's layouts are written in float32; bfloat16 is for the Llama "
                     "family's Hugging Face directories");
  }
  const GPTExportFormat format = [&] {
    try {
      return parse_gpt_export_format(args.format);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--format: ") + e.what());
    }
  }();
  // The files are checked and locked before anything is read: not a directory or a device,
  // never the checkpoint itself or the base weights an adapter-only checkpoint reads (whatever
  // --overwrite says), an earlier export or a file of the user's replaced only with --overwrite,
  // and written by this export alone until it ends.
  const std::filesystem::path out(args.out);
  std::vector<OutputFile> files;
  if (format == GPTExportFormat::hugging_face) {
    for (const char* name : {"model.safetensors", "config.json"}) files.push_back({"--out", (out / name).string(), OutputKind::file});
  } else {
    files.push_back({"--out", args.out, OutputKind::file});
  }
  // The weights: a checkpoint of ours, or another tool's file or Hugging Face directory.
  namespace fs = std::filesystem;
  std::vector<InputFile> inputs;
  std::error_code ec;
  const bool directory = fs::is_directory(args.checkpoint, ec);
  const std::string weights = directory ? (fs::path(args.checkpoint) / "model.safetensors").string() : args.checkpoint;
  inputs.push_back({"--checkpoint", weights, InputKind::file});
  const fs::path config = fs::path(weights).parent_path() / "config.json";
  if (fs::is_regular_file(config, ec)) inputs.push_back({"--checkpoint's config.json", config.string(), InputKind::file});
  const bool ours = !(directory && !fs::is_regular_file(weights, ec)) &&
                    gpt_weights_layout(weights) == GPTWeightsLayout::attograd;
  std::optional<Checkpoint> checkpoint;
  if (ours) {
    checkpoint.emplace(Checkpoint::open(weights));
    if (checkpoint->has_entry("finetune")) {
      const std::string base = finetune_options_from(*checkpoint).init_from;
      if (!base.empty()) inputs.push_back({"the checkpoint's base weights", base, InputKind::file});
    }
  }
  const OutputLocks locks = [&] {
    try {
      return prepare_outputs(files, {.overwrite = args.overwrite, .inputs = inputs});
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }();
  GPTFileHints hints = args.hints;
  hints.need_tokenizer = false;  // the formats hold no tokenizer
  const LoadedGPT loaded = ours ? load_gpt_checkpoint(*checkpoint) : load_gpt(args.checkpoint, hints).gpt;
  const GPTOptions& o = loaded.model->options();
  // A fine-tuned model's function is its base weight plus the adapters' low-rank update: the
  // formats hold plain weights, so each W becomes W + (alpha / r) B A before it is written.
  const int64_t merged = merge_lora(*loaded.model);
  write_gpt_weights(*loaded.model, format, args.out);
  std::cout << "wrote " << args.out << (format == GPTExportFormat::hugging_face ? "/model.safetensors and config.json" : "")
            << ": GPT " << o.n_layers << " layers, " << o.n_head << " heads, d_model " << o.d_model << ", context "
            << o.block_size << ", vocab " << o.vocab << ", " << loaded.model->num_parameters() << " parameters, "
            << (format == GPTExportFormat::hugging_face ? "Hugging Face GPT-2 layout" : "llm.c version 3 (float32)");
  if (merged > 0) std::cout << ", " << merged << " LoRA adapters merged into their weights";
  std::cout << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Writes a GPT checkpoint in Hugging Face's GPT-2 layout (model.safetensors + config.json) or as "
               "llm.c's .bin.",
               tool_name(argc, argv, "export_gpt")};
  app.add_option("--checkpoint", args.checkpoint,
                 "a checkpoint written by train_gpt (a GPT, or a Llama-family model, which only hf expresses), or GPT-2 "
                 "weights of another tool: a Hugging Face directory or "
                 "model.safetensors, a nanoGPT state_dict as safetensors, an llm.c .bin")
      ->required()
      ->check(nonempty_path());
  app.add_option("--format", args.format, "hf (a directory: model.safetensors, config.json) or llmc (one .bin file)")
      ->required();
  app.add_option("--out", args.out, "the directory (hf) or file (llmc) to write")
      ->required()
      ->check(nonempty_path());
  app.add_option("--dtype", args.dtype,
                 "f32 (the default) or bf16 (rounded to nearest even): the tensors of a Llama-family Hugging Face "
                 "directory")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_flag("--overwrite", args.overwrite, "replace the files of an earlier export (or others of those names)");
  add_weights_flags(app, args.hints, /*with_tokenizer=*/false);
  return tool_main(app, argc, argv, [&] { return run(args); });
}
