// The GPT's options as the JSON objects a checkpoint keeps in its metadata, and back, one field list
// per struct read in both directions (train/io/json_text.h). Parsing checks every field's type,
// rejects unknown and missing ones and validates like the struct's own validate();
// std::invalid_argument starting with the function's name says what is wrong.
#pragma once

#include <string>

#include "attograd/models/gpt/gpt.h"

namespace ag {

std::string gpt_options_to_json(const GPTOptions& options);
GPTOptions gpt_options_from_json(const std::string& json);

}  // namespace ag
