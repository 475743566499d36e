// --tokenizer, --heads and --activation for the programs that read a GPT from any file (generate,
// evaluate, export_gpt): what a file of another tool does not say (models/gpt/gpt_load.h). An attograd
// checkpoint says all three itself, and load_gpt refuses them beside it.
//
//   GPTFileHints hints;
//   add_weights_flags(app, hints);
//   ...parse...
//   LoadedGPTFile file = load_gpt(args.checkpoint, hints);
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_load.h"
#include "flags.h"

namespace ag {

// with_tokenizer false: the program uses no tokenizer (an export), so no --tokenizer.
inline void add_weights_flags(CLI::App& app, GPTFileHints& hints, bool with_tokenizer = true) {
  if (with_tokenizer) {
    app.add_option("--tokenizer", hints.tokenizer,
                   "for a Hugging Face, nanoGPT or llm.c file: byte, gpt2 or a vocabulary file of train_bpe (default: "
                   "GPT-2's, for its 50257 tokens)")
        ->check(one_of({"byte", "gpt2"}) | CLI::ExistingFile);
  }
  app.add_option("--heads", hints.n_head,
                 "for a safetensors file without config.json beside it: attention heads (default: d_model / 64, "
                 "GPT-2's head size; a nanoGPT file must say)")
      ->check(integer_in<int64_t>(1, GPTLimits::n_head));
  app.add_option("--activation", hints.activation,
                 "for a safetensors file without config.json beside it: gelu, gelu_tanh or relu (default: gelu_tanh "
                 "for Hugging Face's GPT-2, gelu for nanoGPT)")
      ->check(parsed_by(parse_activation, std::string(activation_name(Activation::relu)) + "|" +
                                             activation_name(Activation::gelu) + "|" +
                                             activation_name(Activation::gelu_tanh)));
}

}  // namespace ag
