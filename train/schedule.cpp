#include "attograd/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "attograd/core/format.h"

namespace ag {

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("LrSchedule: " + what); }

}  // namespace

constexpr Named<LrDecay> kLrDecayNames[] = {
    {LrDecay::constant, "constant"}, {LrDecay::cosine, "cosine"}, {LrDecay::linear, "linear"}};

const char* lr_decay_name(LrDecay decay) { return name_of(kLrDecayNames, decay); }

LrDecay parse_lr_decay(const std::string& name) { return named(kLrDecayNames, name, "learning-rate schedule"); }

LrSchedule::LrSchedule(const LrScheduleOptions& options) : options_(options) {
  const LrScheduleOptions& o = options;
  if (!std::isfinite(o.lr) || o.lr < 0) bad("lr must be finite and >= 0, got " + std::to_string(o.lr));
  if (!std::isfinite(o.min_lr) || o.min_lr < 0 || o.min_lr > o.lr) {
    bad("min_lr must be in [0, lr], got min_lr " + std::to_string(o.min_lr) + " with lr " + std::to_string(o.lr));
  }
  if (o.warmup_steps < 0) bad("warmup_steps must be >= 0, got " + std::to_string(o.warmup_steps));
  if (o.decay != LrDecay::constant && o.total_steps <= o.warmup_steps) {
    bad(std::string(lr_decay_name(o.decay)) + " decay needs total_steps > warmup_steps, got total_steps " +
        std::to_string(o.total_steps) + " and warmup_steps " + std::to_string(o.warmup_steps));
  }
}

double LrSchedule::at(int64_t step) const {
  const LrScheduleOptions& o = options_;
  if (step < 0) bad("step must be >= 0, got " + std::to_string(step));
  if (step < o.warmup_steps) {
    return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  if (o.decay == LrDecay::constant) return o.lr;
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup_steps) /
                                            static_cast<double>(o.total_steps - o.warmup_steps));
  switch (o.decay) {
    case LrDecay::constant: return o.lr;
    case LrDecay::cosine: return o.min_lr + (o.lr - o.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    case LrDecay::linear: return o.lr - (o.lr - o.min_lr) * progress;
  }
  return o.lr;
}

}  // namespace ag
