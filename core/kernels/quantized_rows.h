// Inside core/quantize.cpp: the direct products of a few rows of x with a quantized matrix (the
// decoding path of kernels::quantized_linear; the arithmetic is described in core/quantize.h).
#pragma once

#include <cstdint>
#include <vector>

#include "attograd/core/quantize.h"

namespace ag::quantized_rows {

// x's rows as the q4_0 product reads them: rounded to int8 in blocks of 32 (zero-padded to
// whole blocks), each block's scale, and for each block eight times the sums of its rounded
// values four by four (the lanes of the integer dot product). Empty for int8 weights, which
// read x as it is.
struct RoundedRows {
  int64_t blocks = 0;
  std::vector<int8_t> values;    // (m, blocks * 32)
  std::vector<float> scales;     // (m, blocks)
  std::vector<int32_t> offsets;  // (m, blocks, 8)
};
RoundedRows round_rows(const float* x, int64_t m, int64_t cols, WeightFormat format);

// y[i, r] = x_i . W_r (+ bias[r]) for every row i < m of x and the rows [r0, r1) of W; y is
// (m, w.rows) row-major.
void multiply(const float* x, const RoundedRows& rounded, int64_t m, const QuantizedMatrix& w, const float* bias,
              float* y, int64_t r0, int64_t r1);

}  // namespace ag::quantized_rows
