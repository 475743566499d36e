// --quantize for the programs that run a trained GPT without training it (generate, evaluate):
// "none" (the default) keeps the float32 weights, "int8" replaces every Linear's weight and the
// tied head by int8 values with a float scale per 32 (GPT::quantize_int8, core/quantize.h): at
// batch 1 a token reads about 3.5x fewer bytes of weights, for slightly different logits.
//
//   std::string quantize = "none";
//   add_quantize_flag(app, quantize);
//   ...parse, load...
//   apply_quantize(model, quantize);
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "attograd/models/gpt/gpt.h"
#include "flags.h"

namespace ag {

inline CLI::Option* add_quantize_flag(CLI::App& app, std::string& text) {
  return app
      .add_option("--quantize", text,
                  "weights for inference: none (float32) or int8 (blocks of 32 with a float scale each; "
                  "about 3.5x fewer bytes read per token)")
      ->check(one_of({"none", "int8"}))
      ->capture_default_str();
}

// After loading: quantizes `model` when `text` is "int8" (add_quantize_flag let nothing else
// through but "none").
inline void apply_quantize(GPT& model, const std::string& text) {
  if (text == "int8") model.quantize_int8();
}

}  // namespace ag
