#include "attograd/core/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "attograd/core/gemm.h"
#include "attograd/core/parallel.h"
#include "kernels/quantized_rows.h"

namespace ag {

namespace {

std::string shape_of(const QuantizedMatrix& w) {
  return "(" + std::to_string(w.rows) + ", " + std::to_string(w.cols) + ")";
}

// Row r of W as floats: cols values.
void dequantize_row(const QuantizedMatrix& w, int64_t r, float* out) {
  const int64_t cols = w.cols;
  if (w.format == WeightFormat::int8) {
    const int8_t* q = w.values.data() + r * cols;
    const float* scale = w.scales.data() + r * w.blocks();
    for (int64_t k = 0; k < cols; ++k) out[k] = static_cast<float>(q[k]) * scale[k / kQuantBlock];
    return;
  }
  const uint8_t* block = w.packed.data() + r * w.blocks() * kQ4BlockBytes;
  for (int64_t k0 = 0; k0 < cols; k0 += kQuantBlock, block += kQ4BlockBytes) {
    const float d = half_to_float(static_cast<uint16_t>(block[0] | (block[1] << 8)));
    for (int64_t j = 0; j < kQuantBlock && k0 + j < cols; ++j) {
      const int nibble = j < 16 ? block[2 + j] & 0x0F : block[2 + j - 16] >> 4;
      out[k0 + j] = static_cast<float>(nibble - 8) * d;
    }
  }
}

[[noreturn]] void not_finite(const Tensor& w, WeightFormat format, float value, int64_t r, int64_t k) {
  throw std::invalid_argument(std::string("quantize (") + format_name(format) + "): the weight " + w.shape().str() +
                              " holds " + std::to_string(value) + " at (" + std::to_string(r) + ", " +
                              std::to_string(k) + "); only finite values can be quantized");
}

// Row r's blocks in int8: values and scales.
void quantize_int8_row(const Tensor& w, const float* v, int64_t r, QuantizedMatrix& q) {
  const int64_t nb = q.blocks();
  int8_t* out = q.values.data() + r * q.cols;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t k0 = b * kQuantBlock, k1 = std::min(k0 + kQuantBlock, q.cols);
    float amax = 0;
    for (int64_t k = k0; k < k1; ++k) {
      if (!std::isfinite(v[k])) not_finite(w, q.format, v[k], r, k);
      amax = std::max(amax, std::fabs(v[k]));
    }
    const float scale = amax / 127.0f;
    q.scales[static_cast<size_t>(r * nb + b)] = scale;
    for (int64_t k = k0; k < k1; ++k) {
      out[k] = scale == 0.0f ? int8_t{0} : static_cast<int8_t>(std::clamp(std::nearbyint(v[k] / scale), -127.0f, 127.0f));
    }
  }
}

// Row r's blocks in q4_0 (the rule at the top of core/quantize.h).
void quantize_q4_row(const Tensor& w, const float* v, int64_t r, QuantizedMatrix& q) {
  const int64_t nb = q.blocks();
  uint8_t* block = q.packed.data() + r * nb * kQ4BlockBytes;
  for (int64_t b = 0; b < nb; ++b, block += kQ4BlockBytes) {
    const int64_t k0 = b * kQuantBlock, k1 = std::min(k0 + kQuantBlock, q.cols);
    float amax = 0, extreme = 0;
    for (int64_t k = k0; k < k1; ++k) {
      if (!std::isfinite(v[k])) not_finite(w, q.format, v[k], r, k);
      if (amax < std::fabs(v[k])) {
        amax = std::fabs(v[k]);
        extreme = v[k];
      }
    }
    const float d = extreme / -8.0f;
    const uint16_t half = float_to_half(d);
    if ((half & 0x7C00) == 0x7C00) {
      throw std::invalid_argument("quantize (q4_0): the weight " + w.shape().str() + " holds " + std::to_string(extreme) +
                                  " in row " + std::to_string(r) + ", columns " + std::to_string(k0) + ".." +
                                  std::to_string(k1 - 1) + ": its block's scale " + std::to_string(d) +
                                  " is past a half's largest value, 65504");
    }
    block[0] = static_cast<uint8_t>(half & 0xFF);
    block[1] = static_cast<uint8_t>(half >> 8);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    const auto nibble = [&](int64_t k) {
      const float value = k < k1 ? v[k] : 0.0f;  // a partial block is padded with zeros
      return std::min(15, static_cast<int>(value * inverse + 8.5f));
    };
    for (int64_t j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(nibble(k0 + j) | (nibble(k0 + j + 16) << 4));
  }
}

// Rows of W per dequantized tile: about 512 KB of floats, a multiple of 16, at least 16.
int64_t tile_rows(int64_t cols) {
  return std::clamp<int64_t>((int64_t{1} << 17) / std::max<int64_t>(cols, 1), 16, 256) / 16 * 16;
}


}  // namespace

const char* format_name(WeightFormat format) { return format == WeightFormat::q4_0 ? "q4_0" : "int8"; }

WeightFormat parse_weight_format(const std::string& text) {
  if (text == "int8") return WeightFormat::int8;
  if (text == "q4_0") return WeightFormat::q4_0;
  throw std::invalid_argument("weight format '" + text + "' is not one of int8, q4_0");
}

uint16_t float_to_half(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00u;  // NaN
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // 65520 and up round to infinity
  if (x < 0x38800000u) {  // below 2^-14: a subnormal half, in steps of 2^-24 (this product is exact)
    float magnitude;
    std::memcpy(&magnitude, &x, sizeof magnitude);
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  // Rebias the exponent (127 -> 15) and round the mantissa from 23 bits to 10, ties to even.
  const uint32_t rebased = x - 0x38000000u;
  return sign | static_cast<uint16_t>((rebased + 0x0FFFu + ((rebased >> 13) & 1u)) >> 13);
}

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu, mantissa = bits & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  const uint32_t x = exponent == 31 ? sign | 0x7F800000u | (mantissa << 13) : sign | ((exponent + 112) << 23) | (mantissa << 13);
  float out;
  std::memcpy(&out, &x, sizeof out);
  return out;
}

QuantizedMatrix quantize(const Tensor& w, WeightFormat format) {
  if (!w.defined() || w.dim() != 2 || w.dtype() != DType::f32) {
    throw std::invalid_argument(std::string("quantize (") + format_name(format) +
                                "): the weight must be a (rows, cols) float32 matrix, got " +
                                (w.defined() ? w.shape().str() + " " + dtype_name(w.dtype()) : "an undefined tensor"));
  }
  const Tensor c = w.contiguous();
  QuantizedMatrix q;
  q.format = format;
  q.rows = c.shape()[0];
  q.cols = c.shape()[1];
  if (format == WeightFormat::int8) {
    q.values.resize(static_cast<size_t>(q.rows * q.cols));
    q.scales.resize(static_cast<size_t>(q.rows * q.blocks()));
  } else {
    q.packed.resize(static_cast<size_t>(q.rows * q.blocks() * kQ4BlockBytes));
  }
  const float* src = c.data<float>();
  const double work = 8.0 * static_cast<double>(c.numel());
  parallel_for(q.rows, parallel_chunks(q.rows, work), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (format == WeightFormat::int8) {
        quantize_int8_row(w, src + r * q.cols, r, q);
      } else {
        quantize_q4_row(w, src + r * q.cols, r, q);
      }
    }
  });
  return q;
}

Tensor dequantize(const QuantizedMatrix& q) {
  Tensor out(Shape{q.rows, q.cols}, DType::f32, "dequantize");
  float* o = out.data<float>();
  for (int64_t r = 0; r < q.rows; ++r) dequantize_row(q, r, o + r * q.cols);
  return out;
}

namespace kernels {

Tensor quantized_linear(const Tensor& x, const QuantizedMatrix& w, const Tensor& bias) {
  if (!x.defined() || x.dim() < 1 || x.dtype() != DType::f32 || x.shape()[-1] != w.cols ||
      (bias.defined() && (bias.dim() != 1 || bias.shape()[0] != w.rows || bias.dtype() != DType::f32))) {
    throw std::invalid_argument(
        std::string("quantized_linear: expected x (..., in) float32 and bias (out,) float32 for the ") +
        format_name(w.format) + " weight (out, in) = " + shape_of(w) + ", got x " +
        (x.defined() ? x.shape().str() + " " + dtype_name(x.dtype()) : "undefined") +
        (bias.defined() ? " bias " + bias.shape().str() + " " + dtype_name(bias.dtype()) : std::string()));
  }
  const int64_t in = w.cols, out = w.rows;
  Shape out_shape(std::vector<int64_t>(x.shape().begin(), x.shape().end() - 1));
  out_shape.push_back(out);
  Tensor y(out_shape, DType::f32, "quantized_linear");
  if (y.numel() == 0) return y;
  const int64_t m = y.numel() / out;  // every leading axis folds into the rows of x
  const Tensor xc = x.contiguous();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  const float* px = xc.data<float>();
  const float* pb = bias.defined() ? bc.data<float>() : nullptr;
  float* py = y.data<float>();
  if (in == 0) {  // empty sums: y is the bias
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 0; r < out; ++r) py[i * out + r] = pb ? pb[r] : 0.0f;
    }
    return y;
  }
  const double work = 2.0 * static_cast<double>(m) * static_cast<double>(out) * static_cast<double>(in);

  if (m <= kQuantizedDirectRows) {
    const quantized_rows::RoundedRows rounded = quantized_rows::round_rows(px, m, in, w.format);
    parallel_for(out, parallel_chunks(out, work),
                 [&](int64_t r0, int64_t r1) { quantized_rows::multiply(px, rounded, m, w, pb, py, r0, r1); });
    return y;
  }
  // Many rows of x: each tile of W's rows is dequantized once and multiplied by gemm.
  const int64_t tile = tile_rows(in);
  const int64_t tiles = (out + tile - 1) / tile;
  parallel_for(tiles, parallel_chunks(tiles, work), [&](int64_t t0, int64_t t1) {
    std::vector<float> buffer(static_cast<size_t>(tile * in));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * tile, nt = std::min(tile, out - r0);
      for (int64_t r = 0; r < nt; ++r) dequantize_row(w, r0 + r, buffer.data() + r * in);
      gemm(Transpose::no, Transpose::yes, m, nt, in, 1.0f, px, in, buffer.data(), in, 0.0f, py + r0, out);
      if (pb) {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t r = 0; r < nt; ++r) py[i * out + r0 + r] += pb[r0 + r];
        }
      }
    }
  });
  return y;
}

}  // namespace kernels

}  // namespace ag
