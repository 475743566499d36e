// The encoder-decoder's options and its tasks' as the JSON objects a checkpoint keeps in its metadata, and back, one field list
// per struct read in both directions (train/io/json_text.h). Parsing checks every field's type,
// rejects unknown and missing ones and validates like the struct's own validate();
// std::invalid_argument starting with the function's name says what is wrong.
#pragma once

#include <string>

#include "attograd/models/seq2seq/seq2seq.h"
#include "attograd/models/seq2seq/seq2seq_tasks.h"

namespace ag {

// tgt_vocab is stored resolved (0, "as the source", is written as src_vocab).
std::string seq2seq_options_to_json(const Seq2SeqOptions& options);
Seq2SeqOptions seq2seq_options_from_json(const std::string& json);

std::string seq2seq_task_options_to_json(const Seq2SeqTaskOptions& options);
Seq2SeqTaskOptions seq2seq_task_options_from_json(const std::string& json);

}  // namespace ag
