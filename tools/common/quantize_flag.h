// --quantize for the programs that run a trained model without training it (generate, evaluate):
// "none" (the default) keeps the float32 weights; "int8" and "q4_0" replace every Linear's
// weight and the tied head by blocks of 32 values with a scale each (GPT::quantize, Llama::quantize,
// core/quantize.h): at batch 1 a token reads about 3.5x (int8) or 7x (q4_0) fewer bytes of
// weights, for slightly (int8) or noticeably (q4_0) different logits.
//
//   std::string quantize = "none";
//   add_quantize_flag(app, quantize);
//   ...parse, load...
//   apply_quantize(model, quantize);
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "attograd/core/quantize.h"
#include "flags.h"

namespace ag {

inline CLI::Option* add_quantize_flag(CLI::App& app, std::string& text) {
  return app
      .add_option("--quantize", text,
                  "weights for inference: none (float32), int8 (blocks of 32 with a float scale each; "
                  "about 3.5x fewer bytes read per token) or q4_0 (GGUF's 4-bit blocks; about 7x fewer)")
      ->check(one_of({"none", "int8", "q4_0"}))
      ->capture_default_str();
}

// After loading: quantizes `model` unless `text` is "none" (add_quantize_flag let nothing else
// through but the formats).
template <typename Model>  // GPT or Llama
void apply_quantize(Model& model, const std::string& text) {
  if (text != "none") model.quantize(parse_weight_format(text));
}

}  // namespace ag
