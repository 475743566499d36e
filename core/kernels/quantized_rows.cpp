#include "quantized_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "lanes.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define ATTOGRAD_QUANT_AVX2 1
#endif

namespace ag::quantized_rows {

namespace {

#ifdef ATTOGRAD_QUANT_AVX2
// Eight int8 values as eight floats.
inline __m256 widen8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

using lanes::horizontal_sum;
#else
// The same additions, in the same order, as lanes::horizontal_sum.
inline float horizontal_sum(const float* lanes) {
  const float t0 = lanes[0] + lanes[4], t1 = lanes[1] + lanes[5], t2 = lanes[2] + lanes[6], t3 = lanes[3] + lanes[7];
  return (t0 + t2) + (t1 + t3);
}
#endif

// ---- int8 ----

struct Int8Row {
  const int8_t* q;
  const float* scale;
};

Int8Row int8_row(const QuantizedMatrix& w, int64_t r) {
  return {w.values.data() + r * w.cols, w.scales.data() + r * w.blocks()};
}

// out[j] = x . (row j of W, dequantized) for kRows rows: per full block the sum of x * q (8
// lanes, 4 steps), times the block's scale, added to the row's accumulator; then the partial
// last block one value at a time, times its scale. Each row performs the same operations
// whether it is computed with others or alone, so the bits do not depend on the grouping.
template <int kRows>
[[gnu::always_inline]] inline void int8_dot(const float* x, int64_t cols, const Int8Row* rows, float* out) {
  const int64_t full = cols / kQuantBlock;
#ifdef ATTOGRAD_QUANT_AVX2
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < full; ++b) {
    const float* xb = x + b * kQuantBlock;
    const __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8), x2 = _mm256_loadu_ps(xb + 16),
                 x3 = _mm256_loadu_ps(xb + 24);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const int8_t* q = rows[r].q + b * kQuantBlock;
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
      for (int64_t k = b * kQuantBlock; k < (b + 1) * kQuantBlock; ++k) s += x[k] * static_cast<float>(rows[r].q[k]);
      acc += s * rows[r].scale[b];
    }
    out[r] = acc;
  }
#endif
  if (full * kQuantBlock < cols) {
    for (int r = 0; r < kRows; ++r) {
      float s = 0;
      for (int64_t k = full * kQuantBlock; k < cols; ++k) s += x[k] * static_cast<float>(rows[r].q[k]);
      out[r] += s * rows[r].scale[full];
    }
  }
}

void int8_multiply(const float* x, int64_t m, const QuantizedMatrix& w, const float* bias, float* y, int64_t r0,
                   int64_t r1) {
  const int64_t cols = w.cols, n = w.rows;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const Int8Row rows[4] = {int8_row(w, r), int8_row(w, r + 1), int8_row(w, r + 2), int8_row(w, r + 3)};
    for (int64_t i = 0; i < m; ++i) {
      float out[4];
      int8_dot<4>(x + i * cols, cols, rows, out);
      for (int j = 0; j < 4; ++j) y[i * n + r + j] = bias ? out[j] + bias[r + j] : out[j];
    }
  }
  for (; r < r1; ++r) {
    const Int8Row row = int8_row(w, r);
    for (int64_t i = 0; i < m; ++i) {
      float out;
      int8_dot<1>(x + i * cols, cols, &row, &out);
      y[i * n + r] = bias ? out + bias[r] : out;
    }
  }
}

// ---- q4_0 ----

// out[j] = the q4_0 product of x's rounded row with rows[j] (kRows rows of packed blocks). Per
// block: the 32 nibbles (low nibbles then high ones, the values' order) times the 32 rounded
// values of x, summed in 8 lanes of four products each, less the lane's offset (8 x its values'
// sum), exactly in integers; then the lane sums as floats times d * x's scale, accumulated in
// the 8 lanes, which are added up at the end. Rows are independent of their grouping.
template <int kRows>
[[gnu::always_inline]] inline void q4_dot(const int8_t* xq, const float* xs, const int32_t* offsets, int64_t blocks,
                                          const uint8_t* const* rows, float* out) {
#ifdef ATTOGRAD_QUANT_AVX2
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < blocks; ++b) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * kQuantBlock));
    const __m256i offset = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets + b * 8));
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* block = rows[r] + b * kQ4BlockBytes;
      uint16_t half;
      std::memcpy(&half, block, sizeof half);
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
      const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), low_nibbles);
      const __m256i sums = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(nibbles, xv), ones), offset);
      const float scale = _cvtsh_ss(half) * xs[b];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(scale), acc[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) out[r] = horizontal_sum(acc[r]);
#else
  for (int r = 0; r < kRows; ++r) {
    float acc[8] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = rows[r] + b * kQ4BlockBytes;
      const float scale = half_to_float(static_cast<uint16_t>(block[0] | (block[1] << 8))) * xs[b];
      const int8_t* xb = xq + b * kQuantBlock;
      for (int lane = 0; lane < 8; ++lane) {
        int32_t s = 0;
        for (int j = 4 * lane; j < 4 * lane + 4; ++j) {
          const int nibble = j < 16 ? block[2 + j] & 0x0F : block[2 + j - 16] >> 4;
          s += nibble * xb[j];
        }
        acc[lane] = std::fma(static_cast<float>(s - offsets[b * 8 + lane]), scale, acc[lane]);
      }
    }
    out[r] = horizontal_sum(acc);
  }
#endif
}

void q4_multiply(const RoundedRows& x, int64_t m, const QuantizedMatrix& w, const float* bias, float* y, int64_t r0,
                 int64_t r1) {
  const int64_t nb = w.blocks(), n = w.rows, row_bytes = nb * kQ4BlockBytes;
  const auto row = [&](int64_t r) { return w.packed.data() + r * row_bytes; };
  const auto x_of = [&](int64_t i) { return x.values.data() + i * nb * kQuantBlock; };
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t* rows[4] = {row(r), row(r + 1), row(r + 2), row(r + 3)};
    for (int64_t i = 0; i < m; ++i) {
      float out[4];
      q4_dot<4>(x_of(i), x.scales.data() + i * nb, x.offsets.data() + i * nb * 8, nb, rows, out);
      for (int j = 0; j < 4; ++j) y[i * n + r + j] = bias ? out[j] + bias[r + j] : out[j];
    }
  }
  for (; r < r1; ++r) {
    const uint8_t* rows[1] = {row(r)};
    for (int64_t i = 0; i < m; ++i) {
      float out;
      q4_dot<1>(x_of(i), x.scales.data() + i * nb, x.offsets.data() + i * nb * 8, nb, rows, &out);
      y[i * n + r] = bias ? out + bias[r] : out;
    }
  }
}

}  // namespace

RoundedRows round_rows(const float* x, int64_t m, int64_t cols, WeightFormat format) {
  RoundedRows out;
  if (format != WeightFormat::q4_0) return out;
  const int64_t nb = (cols + kQuantBlock - 1) / kQuantBlock;
  out.blocks = nb;
  out.values.assign(static_cast<size_t>(m * nb * kQuantBlock), 0);
  out.scales.assign(static_cast<size_t>(m * nb), 0.0f);
  out.offsets.assign(static_cast<size_t>(m * nb * 8), 0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t k0 = b * kQuantBlock, k1 = std::min(k0 + kQuantBlock, cols);
      const float* v = x + i * cols;
      float amax = 0;
      bool finite = true;
      for (int64_t k = k0; k < k1; ++k) {
        amax = std::max(amax, std::fabs(v[k]));
        finite = finite && std::isfinite(v[k]);
      }
      // A NaN or infinity in x makes the block's scale NaN, its values 0: the products are NaN,
      // as they are in float.
      const float scale = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
      out.scales[static_cast<size_t>(i * nb + b)] = scale;
      int8_t* q = out.values.data() + (i * nb + b) * kQuantBlock;
      int32_t* offset = out.offsets.data() + (i * nb + b) * 8;
      for (int64_t k = k0; k < k1; ++k) {
        const float rounded = scale > 0.0f ? std::nearbyint(v[k] / scale) : 0.0f;
        q[k - k0] = static_cast<int8_t>(std::clamp(rounded, -127.0f, 127.0f));
        offset[(k - k0) / 4] += 8 * q[k - k0];
      }
    }
  }
  return out;
}

void multiply(const float* x, const RoundedRows& rounded, int64_t m, const QuantizedMatrix& w, const float* bias,
              float* y, int64_t r0, int64_t r1) {
  if (w.format == WeightFormat::q4_0) {
    q4_multiply(rounded, m, w, bias, y, r0, r1);
  } else {
    int8_multiply(x, m, w, bias, y, r0, r1);
  }
}

}  // namespace ag::quantized_rows
