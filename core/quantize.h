// int8 weight-only quantization for inference: a float32 weight (out, in) held as int8 values
// and one float scale per block of kInt8Block values along `in`, and the product of float32
// activations with it.
//
//   Int8Matrix q = quantize_int8(linear.weight().value());  // (out, in) f32
//   Tensor y = kernels::int8_linear(x, q, bias);            // x (..., in) -> y (..., out), f32
//
// The format is the symmetric one of CPU inference engines: block b of row r covers columns
// [32 b, min(32 b + 32, in)) (the last block is partial when in is not a multiple of 32), its
// scale is max|w| / 127 over the block, and each value is round-to-nearest(w / scale) (ties to
// even) in [-127, 127]; an all-zero block has scale 0 and values 0. Dequantized, a value is
// q * scale (one float product), within scale / 2 of the original. At batch 1 a product reads
// about 1.125 bytes per weight instead of 4: decoding, which is bound by memory bandwidth, reads
// 3.5x fewer bytes.
//
// int8_linear for a few rows of x (decoding: kInt8DirectRows or fewer) reads the int8 values
// directly, sum over each block of x * q, times the block's scale, added up block after block;
// for more rows (a prompt, a perplexity window) it dequantizes tiles of rows of W into float and
// multiplies them with gemm. Both are split over the thread pool by rows of W, with fixed tile
// boundaries, so any thread count gives the same bits. There is no backward: the matrix is a
// constant of inference (layers/linear.h refuses a forward that would need gradients).
#pragma once

#include <cstdint>
#include <vector>

#include "attograd/core/tensor.h"

namespace ag {

inline constexpr int64_t kInt8Block = 32;
// Rows of x up to which int8_linear reads the int8 values directly instead of going through
// dequantized tiles and gemm.
inline constexpr int64_t kInt8DirectRows = 8;

struct Int8Matrix {
  int64_t rows = 0;  // out
  int64_t cols = 0;  // in
  std::vector<int8_t> values;  // (rows, cols), row-major
  std::vector<float> scales;   // (rows, blocks())

  int64_t blocks() const { return (cols + kInt8Block - 1) / kInt8Block; }
  bool empty() const { return rows == 0; }
  // The bytes of values and scales (what a product with one row of x reads).
  int64_t bytes() const {
    return static_cast<int64_t>(values.size()) + static_cast<int64_t>(scales.size() * sizeof(float));
  }
};

// w: (rows, cols) float32, any strides, every value finite; std::invalid_argument naming the
// shape (and the first non-finite value's place) otherwise.
Int8Matrix quantize_int8(const Tensor& w);
// (rows, cols) float32: each value q * its block's scale.
Tensor dequantize(const Int8Matrix& q);

namespace kernels {
// y = x W^T + bias with W the dequantized matrix: x (..., cols) f32 -> (..., rows) f32; bias
// undefined or (rows,) f32. std::invalid_argument naming the shapes and dtypes otherwise.
Tensor int8_linear(const Tensor& x, const Int8Matrix& w, const Tensor& bias = Tensor());
}  // namespace kernels

}  // namespace ag
