// Learning-rate schedules: the rate the trainer hands the optimizer before each step (the
// other thing it does around a step, clipping, is in clip.h).
//
//   LrSchedule schedule({.lr = 3e-3, .min_lr = 3e-4, .warmup_steps = 100, .total_steps = 2000,
//                        .decay = LrDecay::cosine});
//   optimizer.set_lr(schedule.at(step));              // step = updates done so far (0-based)
//
// The schedule, for update number `step` (0, 1, ...), W = warmup_steps, S = total_steps:
//   step <  W:  lr * (step + 1) / W                  (the first update already moves)
//   step >= W:  p = min(1, (step - W) / (S - W)) and
//               constant: lr
//               cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2
//               linear:   lr - (lr - min_lr) * p
// so the peak is reached at step W, and min_lr at step S (and held after it).
#pragma once

#include <cstdint>
#include <string>

#include "attograd/autograd/variable.h"

namespace ag {

enum class LrDecay { constant, cosine, linear };
const char* lr_decay_name(LrDecay decay);  // "constant", "cosine", "linear"
// Inverse of lr_decay_name; std::invalid_argument listing the choices otherwise.
LrDecay parse_lr_decay(const std::string& name);

struct LrScheduleOptions {
  double lr = 1e-3;           // peak learning rate
  double min_lr = 0.0;        // reached at total_steps by cosine and linear decay
  int64_t warmup_steps = 0;   // linear ramp from lr / W up to lr
  int64_t total_steps = 0;    // end of the decay; needs total_steps > warmup_steps unless constant
  LrDecay decay = LrDecay::constant;
};

class LrSchedule {
 public:
  // Throws std::invalid_argument naming the bad option (negative or non-finite rates,
  // min_lr > lr, negative warm-up, total_steps <= warmup_steps for a decay).
  explicit LrSchedule(const LrScheduleOptions& options);
  // The learning rate of update number `step` (>= 0).
  double at(int64_t step) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

}  // namespace ag
