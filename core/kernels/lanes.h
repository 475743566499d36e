// Inside core/: the sum of a vector's eight float lanes, in one fixed order (the upper half
// onto the lower, then pairs, then the last two), for the kernels whose bits must not depend
// on how their rows are grouped. Only with AVX2.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>

namespace ag::lanes {

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace ag::lanes
#endif
