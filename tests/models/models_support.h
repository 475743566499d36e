// Helpers for the model tests: a small GPT configuration and seeded tensors.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "attograd.h"
#include "attograd/models/gpt/generate.h"
#include "attograd/models/gpt/gpt.h"
#include "attograd/models/seq2seq/seq2seq.h"
#include "attograd/models/seq2seq/seq2seq_decode.h"
#include "attograd/models/toy/sequence_model.h"
#include "support.h"

namespace ag::testing {

// Small enough for full-Jacobian gradient checks (about 1,900 parameters).
inline GPTOptions small_gpt() { return {.vocab = 7, .block_size = 5, .d_model = 8, .n_head = 2, .n_layers = 2}; }

inline Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Generator gen(seed);
  return normal(shape, 0.0, 1.0, gen, dtype);
}

// ids (1, n) from a list.
inline Indices row_ids(const std::vector<int64_t>& ids) { return Indices(Shape{1, static_cast<int64_t>(ids.size())}, ids); }

}  // namespace ag::testing
