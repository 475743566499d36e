// GPTJob: the language model job (text/lm_job.h) under the name GPT programs and tests know it
// by, with the checkpoint helpers for the "gpt" model_kind.
#pragma once

#include <string>

#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_load.h"
#include "attograd/text/lm_job.h"

namespace ag {

using GPTJobOptions = LanguageModelJobOptions;
using GPTJob = LanguageModelJob;

inline GPTJobOptions gpt_job_options_from(const Checkpoint& checkpoint, const GPTJobOptions& base) {
  return lm_job_options_from(checkpoint, "gpt", base);
}
inline bool gpt_data_names_corpus(const Checkpoint& checkpoint) { return lm_data_names_corpus(checkpoint, "gpt"); }
inline std::string gpt_data_sources(const Checkpoint& checkpoint) { return lm_data_sources(checkpoint, "gpt"); }
inline void check_against_model(const GPTJobOptions& options, const GPTOptions& model) {
  check_against_model(options, model.block_size);
}

}  // namespace ag
