// The memory a toy-task run needs (train/memory.h says what is counted), from its options alone.
#pragma once

#include <cstdint>

#include "attograd/models/toy/sequence_model.h"
#include "attograd/models/toy/sequence_tasks.h"
#include "attograd/train/memory.h"
#include "attograd/train/trainer.h"

namespace ag {

// Bytes of evaluating one held-out row (no graph kept), and of a training step's activations.
double eval_bytes_per_row(const SequenceModelOptions& model, int64_t seq_len);
double training_activation_bytes(const SequenceModelOptions& model, const SequenceTaskOptions& task,
                                 bool recompute = false);

// How many held-out rows to evaluate at once: at most `max_rows`, and no more than fit in the
// larger of a training step's activations and 256 MiB (at least one row).
int64_t eval_rows_for(const SequenceModelOptions& model, const SequenceTaskOptions& task, int64_t max_rows);

// Parameters of the model, counted from its options without building it (exact:
// tests/train/test_hostile.cpp holds it against num_parameters()).
double parameter_count(const SequenceModelOptions& model);

MemoryEstimate estimate_training_memory(const SequenceModelOptions& model, const SequenceTaskOptions& task,
                                        const TrainerOptions& trainer, int64_t eval_sequences);

}  // namespace ag
