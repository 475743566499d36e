// The memory a GPT training run needs (train/memory.h says what is counted), from its options alone.
#pragma once

#include <cstdint>

#include "attograd/models/gpt/gpt.h"
#include "attograd/train/memory.h"
#include "attograd/train/trainer.h"

namespace ag {

// Parameters of the model, counted from its options without building it (exact:
// tests/train/test_hostile.cpp holds it against num_parameters()).
double parameter_count(const GPTOptions& model);

// `batch` windows of block_size tokens per step.
MemoryEstimate estimate_training_memory(const GPTOptions& model, int64_t batch, const TrainerOptions& trainer);

}  // namespace ag
