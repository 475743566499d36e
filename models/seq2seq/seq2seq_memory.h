// The memory an encoder-decoder training run needs (train/memory.h says what is counted), from
// its options alone.
#pragma once

#include <cstdint>

#include "attograd/models/seq2seq/seq2seq.h"
#include "attograd/models/seq2seq/seq2seq_tasks.h"
#include "attograd/train/memory.h"
#include "attograd/train/trainer.h"

namespace ag {

// Parameters of the model, counted from its options without building it (exact:
// tests/train/test_hostile.cpp holds it against num_parameters()).
double parameter_count(const Seq2SeqOptions& model);

// Sources and targets counted at the model's max_len (padding included), and the held-out set
// the job keeps for the whole run.
MemoryEstimate estimate_training_memory(const Seq2SeqOptions& model, const Seq2SeqTaskOptions& task,
                                        const TrainerOptions& trainer, int64_t eval_sequences);

}  // namespace ag
