// The options of the models and of the toy tasks as the JSON objects a checkpoint keeps in its
// metadata, and back. Models and tasks know nothing of files (models/ sits below train/, and the
// tasks only generate data), so their (de)serialisation lives here, one field list per struct
// read in both directions (train/io/json_text.h).
//
// Parsing checks every field's type, rejects unknown and missing ones and validates like the
// struct's own validate(); std::invalid_argument starting with the function's name says what
// is wrong.
#pragma once

#include <string>

#include "attograd/models/gpt.h"
#include "attograd/models/seq2seq.h"
#include "attograd/models/sequence_model.h"
#include "attograd/train/data/seq2seq_tasks.h"
#include "attograd/train/data/sequence_tasks.h"

namespace ag {

std::string sequence_model_options_to_json(const SequenceModelOptions& options);
SequenceModelOptions sequence_model_options_from_json(const std::string& json);

std::string gpt_options_to_json(const GPTOptions& options);
GPTOptions gpt_options_from_json(const std::string& json);

// tgt_vocab is stored resolved (0, "as the source", is written as src_vocab).
std::string seq2seq_options_to_json(const Seq2SeqOptions& options);
Seq2SeqOptions seq2seq_options_from_json(const std::string& json);

// The seeds are stored as json_text.h's seed_json: a full uint64 survives.
std::string sequence_task_options_to_json(const SequenceTaskOptions& options);
SequenceTaskOptions sequence_task_options_from_json(const std::string& json);

std::string seq2seq_task_options_to_json(const Seq2SeqTaskOptions& options);
Seq2SeqTaskOptions seq2seq_task_options_from_json(const std::string& json);

}  // namespace ag
