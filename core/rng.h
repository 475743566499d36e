// Counter-based random numbers. Every random value is a pure function of
// (seed, step, call, element index), so results do not depend on how work is split across
// threads, and replaying a step replays its randomness:
//   - `step` is set by whoever drives training (the trainer sets it to the optimizer step);
//   - `call` counts the random ops within a step (each dropout, each initialiser);
//   - the element index picks the value inside one op.
// Saving {seed, step, call} (GeneratorState) and restoring it reproduces the same bits; the
// numerical check (autograd/gradcheck.h) does exactly that so that every evaluation sees the
// same dropout mask.
#pragma once

#include <cstdint>

namespace ag {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t step = 0;
  uint64_t call = 0;
  friend bool operator==(const GeneratorState&, const GeneratorState&) = default;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { state_.seed = seed; }

  uint64_t seed() const { return state_.seed; }
  void manual_seed(uint64_t seed) { state_ = GeneratorState{seed, 0, 0}; }
  // Starts step `step`: random ops after this draw from streams (step, 0), (step, 1), ...
  void set_step(uint64_t step) { state_.step = step; state_.call = 0; }

  GeneratorState state() const { return state_; }
  void set_state(const GeneratorState& s) { state_ = s; }

  // Claims the key of a fresh stream for one random op; element i of that op is bits(key, i).
  uint64_t next_stream();

  // 64 random bits for element `index` of the stream `key`.
  static uint64_t bits(uint64_t key, uint64_t index);
  // Uniform in [0, 1): 24 random bits for float, 53 for double.
  static float uniform_f32(uint64_t key, uint64_t index) {
    return static_cast<float>(bits(key, index) >> 40) * 0x1.0p-24f;
  }
  static double uniform_f64(uint64_t key, uint64_t index) {
    return static_cast<double>(bits(key, index) >> 11) * 0x1.0p-53;
  }
  // Standard normal (Box-Muller over elements 2i and 2i+1 of the stream).
  static double normal(uint64_t key, uint64_t index);

 private:
  GeneratorState state_;
};

// The process-wide generator used when no generator is passed explicitly.
Generator& default_generator();
inline void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

// Restores the default generator's state when it goes out of scope.
class GeneratorStateGuard {
 public:
  GeneratorStateGuard() : saved_(default_generator().state()) {}
  ~GeneratorStateGuard() { default_generator().set_state(saved_); }
  GeneratorStateGuard(const GeneratorStateGuard&) = delete;
  GeneratorStateGuard& operator=(const GeneratorStateGuard&) = delete;

 private:
  GeneratorState saved_;
};

}  // namespace ag
