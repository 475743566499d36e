#include "attograd/core/quantize.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "attograd/core/gemm.h"
#include "attograd/core/parallel.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ATTOGRAD_INT8_AVX2 1
#endif

namespace ag {

namespace {

// Row r of a quantized matrix, as the kernels read it.
struct Int8Row {
  const int8_t* q;
  const float* scale;
};

Int8Row row_of(const Int8Matrix& w, int64_t r) {
  return {w.values.data() + r * w.cols, w.scales.data() + r * w.blocks()};
}

void dequantize_row(const Int8Row& row, int64_t cols, float* out) {
  for (int64_t k = 0; k < cols; ++k) out[k] = static_cast<float>(row.q[k]) * row.scale[k / kInt8Block];
}

#ifdef ATTOGRAD_INT8_AVX2
// Eight int8 values as eight floats.
inline __m256 widen8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

// out[j] = x . (row j of W, dequantized) for the kRows rows starting at `rows`: per full block
// the sum of x * q (8 lanes, 4 steps), times the block's scale, added to the row's accumulator;
// then the partial last block one value at a time, times its scale. The rows are independent
// and each performs the same operations whether it is computed with others or alone (kRows 4
// or 1), so the bits do not depend on how rows are grouped or split over threads.
template <int kRows>
[[gnu::always_inline]] inline void dot_rows(const float* x, int64_t cols, const Int8Row* rows, float* out) {
  const int64_t full = cols / kInt8Block;
#ifdef ATTOGRAD_INT8_AVX2
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < full; ++b) {
    const float* xb = x + b * kInt8Block;
    const __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8), x2 = _mm256_loadu_ps(xb + 16),
                 x3 = _mm256_loadu_ps(xb + 24);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const int8_t* q = rows[r].q + b * kInt8Block;
      __m256 s = _mm256_mul_ps(x0, widen8(q));
      s = _mm256_fmadd_ps(x1, widen8(q + 8), s);
      s = _mm256_fmadd_ps(x2, widen8(q + 16), s);
      s = _mm256_fmadd_ps(x3, widen8(q + 24), s);
      acc[r] = _mm256_fmadd_ps(s, _mm256_set1_ps(rows[r].scale[b]), acc[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) out[r] = horizontal_sum(acc[r]);
#else
  for (int r = 0; r < kRows; ++r) {
    float acc = 0;
    for (int64_t b = 0; b < full; ++b) {
      float s = 0;
      for (int64_t k = b * kInt8Block; k < (b + 1) * kInt8Block; ++k) s += x[k] * static_cast<float>(rows[r].q[k]);
      acc += s * rows[r].scale[b];
    }
    out[r] = acc;
  }
#endif
  if (full * kInt8Block < cols) {
    for (int r = 0; r < kRows; ++r) {
      float s = 0;
      for (int64_t k = full * kInt8Block; k < cols; ++k) s += x[k] * static_cast<float>(rows[r].q[k]);
      out[r] += s * rows[r].scale[full];
    }
  }
}

// y (m, rows) for rows [r0, r1) of W, x (m, cols), m small: W's rows four at a time, each group
// against every row of x while it is in cache.
void direct_rows(const float* x, int64_t m, const Int8Matrix& w, const float* bias, float* y, int64_t r0, int64_t r1) {
  const int64_t cols = w.cols, n = w.rows;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const Int8Row rows[4] = {row_of(w, r), row_of(w, r + 1), row_of(w, r + 2), row_of(w, r + 3)};
    for (int64_t i = 0; i < m; ++i) {
      float out[4];
      dot_rows<4>(x + i * cols, cols, rows, out);
      for (int j = 0; j < 4; ++j) y[i * n + r + j] = bias ? out[j] + bias[r + j] : out[j];
    }
  }
  for (; r < r1; ++r) {
    const Int8Row row = row_of(w, r);
    for (int64_t i = 0; i < m; ++i) {
      float out;
      dot_rows<1>(x + i * cols, cols, &row, &out);
      y[i * n + r] = bias ? out + bias[r] : out;
    }
  }
}

// Rows of W per dequantized tile: about 512 KB of floats, a multiple of 16, at least 16.
int64_t tile_rows(int64_t cols) {
  return std::clamp<int64_t>((int64_t{1} << 17) / std::max<int64_t>(cols, 1), 16, 256) / 16 * 16;
}

std::string shape_of(const Int8Matrix& w) { return "(" + std::to_string(w.rows) + ", " + std::to_string(w.cols) + ")"; }

}  // namespace

Int8Matrix quantize_int8(const Tensor& w) {
  if (!w.defined() || w.dim() != 2 || w.dtype() != DType::f32) {
    throw std::invalid_argument(std::string("quantize_int8: the weight must be a (rows, cols) float32 matrix, got ") +
                                (w.defined() ? w.shape().str() + " " + dtype_name(w.dtype()) : "an undefined tensor"));
  }
  const Tensor c = w.contiguous();
  Int8Matrix q;
  q.rows = c.shape()[0];
  q.cols = c.shape()[1];
  q.values.resize(static_cast<size_t>(q.rows * q.cols));
  q.scales.resize(static_cast<size_t>(q.rows * q.blocks()));
  const float* src = c.data<float>();
  const int64_t nb = q.blocks();
  const double work = 8.0 * static_cast<double>(c.numel());
  parallel_for(q.rows, parallel_chunks(q.rows, work), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t k0 = b * kInt8Block, k1 = std::min(k0 + kInt8Block, q.cols);
        const float* v = src + r * q.cols;
        float amax = 0;
        for (int64_t k = k0; k < k1; ++k) {
          if (!std::isfinite(v[k])) {
            throw std::invalid_argument("quantize_int8: the weight " + w.shape().str() + " holds " +
                                        std::to_string(v[k]) + " at (" + std::to_string(r) + ", " + std::to_string(k) +
                                        "); only finite values can be quantized");
          }
          amax = std::max(amax, std::fabs(v[k]));
        }
        const float scale = amax / 127.0f;
        q.scales[static_cast<size_t>(r * nb + b)] = scale;
        int8_t* out = q.values.data() + r * q.cols;
        for (int64_t k = k0; k < k1; ++k) {
          out[k] = scale == 0.0f ? int8_t{0}
                                 : static_cast<int8_t>(std::clamp(std::nearbyint(v[k] / scale), -127.0f, 127.0f));
        }
      }
    }
  });
  return q;
}

Tensor dequantize(const Int8Matrix& q) {
  Tensor out(Shape{q.rows, q.cols}, DType::f32, "dequantize");
  float* o = out.data<float>();
  for (int64_t r = 0; r < q.rows; ++r) dequantize_row(row_of(q, r), q.cols, o + r * q.cols);
  return out;
}

namespace kernels {

Tensor int8_linear(const Tensor& x, const Int8Matrix& w, const Tensor& bias) {
  if (!x.defined() || x.dim() < 1 || x.dtype() != DType::f32 || x.shape()[-1] != w.cols ||
      (bias.defined() && (bias.dim() != 1 || bias.shape()[0] != w.rows || bias.dtype() != DType::f32))) {
    throw std::invalid_argument(
        "int8_linear: expected x (..., in) float32 and bias (out,) float32 for the int8 weight (out, in) = " +
        shape_of(w) + ", got x " + (x.defined() ? x.shape().str() + " " + dtype_name(x.dtype()) : "undefined") +
        (bias.defined() ? " bias " + bias.shape().str() + " " + dtype_name(bias.dtype()) : std::string()));
  }
  const int64_t in = w.cols, out = w.rows;
  Shape out_shape(std::vector<int64_t>(x.shape().begin(), x.shape().end() - 1));
  out_shape.push_back(out);
  Tensor y(out_shape, DType::f32, "int8_linear");
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

  if (m <= kInt8DirectRows) {
    parallel_for(out, parallel_chunks(out, work),
                 [&](int64_t r0, int64_t r1) { direct_rows(px, m, w, pb, py, r0, r1); });
    return y;
  }
  // Many rows of x: each tile of W's rows is dequantized once and multiplied by gemm.
  const int64_t tile = tile_rows(in);
  const int64_t tiles = (out + tile - 1) / tile;
  parallel_for(tiles, parallel_chunks(tiles, work), [&](int64_t t0, int64_t t1) {
    std::vector<float> buffer(static_cast<size_t>(tile * in));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * tile, nt = std::min(tile, out - r0);
      for (int64_t r = 0; r < nt; ++r) dequantize_row(row_of(w, r0 + r), in, buffer.data() + r * in);
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
