// The toy tagger's options and its tasks' as the JSON objects a checkpoint keeps in its metadata, and back, one field list
// per struct read in both directions (train/io/json_text.h). Parsing checks every field's type,
// rejects unknown and missing ones and validates like the struct's own validate();
// std::invalid_argument starting with the function's name says what is wrong.
#pragma once

#include <string>

#include "attograd/models/toy/sequence_model.h"
#include "attograd/models/toy/sequence_tasks.h"

namespace ag {

std::string sequence_model_options_to_json(const SequenceModelOptions& options);
SequenceModelOptions sequence_model_options_from_json(const std::string& json);

// The seeds are stored as json_text.h's seed_json: a full uint64 survives.
std::string sequence_task_options_to_json(const SequenceTaskOptions& options);
SequenceTaskOptions sequence_task_options_from_json(const std::string& json);

}  // namespace ag
