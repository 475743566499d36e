// export_gpt: writes a GPT trained here in a layout other tools read: Hugging Face's GPT-2
// (a directory with model.safetensors and config.json, for transformers' GPT2LMHeadModel) or
// llm.c's .bin (version 3, float32). train/io/gpt_weights.h says what each holds.
//
//   build/examples/export_gpt --checkpoint runs/gpt/ckpt.safetensors --format hf --out gpt2-export
//   build/examples/export_gpt --checkpoint runs/gpt/ckpt.safetensors --format llmc --out model.bin
//
// The tokenizer is not exported: a model trained with --tokenizer gpt2 reads GPT-2's, which the
// other tools have. A file that exists is replaced only with --overwrite. Exit codes: 0 done, 1 error (a file, a model the format cannot express),
// 2 bad command line.
#include <iostream>
#include <string>
#include <vector>

#include "attograd/train/gpt_job.h"
#include "attograd/train/io/gpt_weights.h"
#include "tool_main.h"

namespace {

using namespace ag;

struct Args {
  std::string checkpoint, format, out;
  bool overwrite = false;
};

int run(const Args& args) {
  const GPTExportFormat format = [&] {
    try {
      return parse_gpt_export_format(args.format);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--format: ") + e.what());
    }
  }();
  if (std::filesystem::weakly_canonical(args.out) == std::filesystem::weakly_canonical(args.checkpoint)) {
    throw UsageError("--out: '" + args.out + "' is the checkpoint being exported");
  }
  // An earlier export, or a file of the user's under one of these names, is replaced only when
  // asked for, before anything is read.
  const std::filesystem::path out(args.out);
  const std::vector<std::filesystem::path> files =
      format == GPTExportFormat::hugging_face ? std::vector{out / "model.safetensors", out / "config.json"}
                                              : std::vector{out};
  for (const std::filesystem::path& file : files) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(file, ec)) && !args.overwrite) {
      throw UsageError("--out: '" + file.string() + "' exists; give --overwrite to replace it");
    }
  }
  const LoadedGPT loaded = load_gpt_checkpoint(args.checkpoint);
  const GPTOptions& o = loaded.model->options();
  write_gpt_weights(*loaded.model, format, args.out);
  std::cout << "wrote " << args.out << (format == GPTExportFormat::hugging_face ? "/model.safetensors and config.json" : "")
            << ": GPT " << o.n_layers << " layers, " << o.n_head << " heads, d_model " << o.d_model << ", context "
            << o.block_size << ", vocab " << o.vocab << ", " << loaded.model->num_parameters() << " parameters, "
            << (format == GPTExportFormat::hugging_face ? "Hugging Face GPT-2 layout" : "llm.c version 3 (float32)")
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Writes a GPT checkpoint in Hugging Face's GPT-2 layout (model.safetensors + config.json) or as "
               "llm.c's .bin.",
               tool_name(argc, argv, "export_gpt")};
  app.add_option("--checkpoint", args.checkpoint, "a checkpoint written by train_gpt")
      ->required()
      ->check(nonempty_path());
  app.add_option("--format", args.format, "hf (a directory: model.safetensors, config.json) or llmc (one .bin file)")
      ->required();
  app.add_option("--out", args.out, "the directory (hf) or file (llmc) to write")
      ->required()
      ->check(nonempty_path());
  app.add_flag("--overwrite", args.overwrite, "replace the files of an earlier export (or others of those names)");
  return tool_main(app, argc, argv, [&] { return run(args); });
}
