// A model's options as the JSON object a checkpoint keeps in its metadata, and back. Models
// know nothing of files (models/ sits below train/), so their (de)serialisation lives here.
#pragma once

#include <string>

#include "attograd/models/gpt.h"
#include "attograd/models/seq2seq.h"
#include "attograd/models/sequence_model.h"

namespace ag {

// Parsing checks every field, rejects unknown ones and validates; std::invalid_argument says
// what is wrong.
std::string sequence_model_options_to_json(const SequenceModelOptions& options);
SequenceModelOptions sequence_model_options_from_json(const std::string& json);

// The same for a GPT; parsing validates against GPTLimits (validate(GPTOptions)).
std::string gpt_options_to_json(const GPTOptions& options);
GPTOptions gpt_options_from_json(const std::string& json);

// The same for the encoder-decoder (tgt_vocab stored resolved).
std::string seq2seq_options_to_json(const Seq2SeqOptions& options);
Seq2SeqOptions seq2seq_options_from_json(const std::string& json);

}  // namespace ag
