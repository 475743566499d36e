#include "attograd/core/rng.h"

#include <cmath>
#include <numbers>

namespace ag {

namespace {

// The SplitMix64 finaliser: a bijective mix of 64 bits with good avalanche.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

}  // namespace

uint64_t Generator::next_stream() {
  const uint64_t key = mix64(mix64(state_.seed + kGolden) ^ mix64(state_.step * kGolden + 1) ^
                             (state_.call * 0xD1B54A32D192ED03ull));
  ++state_.call;
  return key;
}

uint64_t Generator::bits(uint64_t key, uint64_t index) { return mix64(key + (index + 1) * kGolden); }

double Generator::normal(uint64_t key, uint64_t index) {
  // u1 in (0, 1] keeps the log finite.
  const double u1 = 1.0 - uniform_f64(key, 2 * index);
  const double u2 = uniform_f64(key, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

}  // namespace ag
