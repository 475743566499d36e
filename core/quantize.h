// Weight-only quantization for inference: a float32 weight (out, in) held in a block format of
// fewer bits, and the product of float32 activations with it.
//
//   QuantizedMatrix q = quantize(linear.weight().value(), WeightFormat::q4_0);  // (out, in) f32
//   Tensor y = kernels::quantized_linear(x, q, bias);  // x (..., in) -> y (..., out), f32
//
// Both formats cut each row into blocks of 32 values along `in` (the last block of a row is
// partial when in is not a multiple of 32) and give each block one scale.
//
// int8: the block's scale is the float max|w| / 127, and each value round-to-nearest(w / scale)
// (ties to even) in [-127, 127], held as int8 (values and scales in two arrays); an all-zero
// block has scale 0. Dequantized, a value is q * scale, within scale / 2 of the original. About
// 1.125 bytes per weight instead of 4.
//
// q4_0: GGUF's Q4_0 block, byte for byte. 18 bytes: the scale d as an IEEE half (little-endian),
// then 16 bytes whose low nibbles hold values 0..15 of the block and high nibbles values 16..31.
// d = m / -8 where m is the block's value of largest magnitude (the first, on ties), and a value
// w is stored as the nibble min(15, floor(w / d + 8.5)), computed as w * (1 / d) in float; an
// all-zero block has d = -0 (0 / -8) and nibbles 8. Dequantized, a value is (nibble - 8) * d with d read
// back from its half: m itself comes back exactly up to d's rounding to a half, the rest within
// d / 2 of the original (d rounded to a half moves them by up to 2^-11 of m more), and the values
// of opposite sign to m clip at 7 d. A partial last block is padded with zeros. 0.5625 bytes per
// weight. |m| must be at most 8 times a half's largest value (65504).
//
// The product for a few rows of x (decoding: kQuantizedDirectRows or fewer) reads the quantized
// values directly:
//  - int8: per block the sum of x * q in float, times the block's scale, added up block by block;
//  - q4_0: x is first rounded to int8 by the int8 rule above (per row, blocks of 32 along `in`,
//    scale max|x| / 127), and per block the integer sum of nibble * x_q, minus 8 times the sum
//    of x_q, times d * x's scale, is added up in float. This is how CPU inference engines
//    multiply 4-bit blocks; its result is the product of the dequantized weights with the
//    rounded x, and x's rounding moves it by at most sum |w| * x's scale / 2 over the row.
// For more rows (a prompt, a perplexity window) both formats dequantize tiles of rows of W into
// float and multiply them with gemm, x unrounded. Both paths split the work over the thread
// pool by rows of W with fixed tile boundaries, so any thread count gives the same bits. There
// is no backward: the matrix is a constant of inference (layers/linear.h refuses a forward that
// would need gradients).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attograd/core/tensor.h"

namespace ag {

inline constexpr int64_t kQuantBlock = 32;
inline constexpr int64_t kQ4BlockBytes = 18;  // a half scale and 16 bytes of nibbles
// Rows of x up to which quantized_linear reads the quantized values directly instead of going
// through dequantized tiles and gemm.
inline constexpr int64_t kQuantizedDirectRows = 8;

enum class WeightFormat : uint8_t { int8, q4_0 };
// "int8", "q4_0"
const char* format_name(WeightFormat format);
// The inverse of format_name; std::invalid_argument listing the formats for any other text.
WeightFormat parse_weight_format(const std::string& text);

struct QuantizedMatrix {
  WeightFormat format = WeightFormat::int8;
  int64_t rows = 0;  // out
  int64_t cols = 0;  // in
  std::vector<int8_t> values;   // int8: (rows, cols), row-major
  std::vector<float> scales;    // int8: (rows, blocks())
  std::vector<uint8_t> packed;  // q4_0: rows * blocks() blocks of kQ4BlockBytes, row by row

  int64_t blocks() const { return (cols + kQuantBlock - 1) / kQuantBlock; }
  bool empty() const { return rows == 0; }
  // The bytes of the quantized matrix (what a product with one row of x reads).
  int64_t bytes() const {
    return static_cast<int64_t>(values.size() + scales.size() * sizeof(float) + packed.size());
  }
};

// w: (rows, cols) float32, any strides, every value finite (for q4_0 also within the half's
// range above); std::invalid_argument naming the shape (and the first bad value's place).
QuantizedMatrix quantize(const Tensor& w, WeightFormat format);
inline QuantizedMatrix quantize_int8(const Tensor& w) { return quantize(w, WeightFormat::int8); }
inline QuantizedMatrix quantize_q4_0(const Tensor& w) { return quantize(w, WeightFormat::q4_0); }
// (rows, cols) float32: each value as the format gives it back.
Tensor dequantize(const QuantizedMatrix& q);

// IEEE half <-> float, round to nearest even (as the q4_0 scale is stored and read).
uint16_t float_to_half(float value);
float half_to_float(uint16_t bits);

namespace kernels {
// y = x W^T + bias with W the quantized matrix (see the top of this file for the arithmetic):
// x (..., cols) f32 -> (..., rows) f32; bias undefined or (rows,) f32. std::invalid_argument
// naming the shapes and dtypes otherwise.
Tensor quantized_linear(const Tensor& x, const QuantizedMatrix& w, const Tensor& bias = Tensor());
}  // namespace kernels

}  // namespace ag
