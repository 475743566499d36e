// TrainerOptions: names of the choices, validation against TrainerLimits, and the JSON of the
// trajectory-shaping options that checkpoints store (train/trainer.h).
#include <cmath>
#include <optional>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/trainer.h"

namespace ag {

LrScheduleOptions schedule_options(const TrainerOptions& o) {
  return {.lr = o.lr, .min_lr = o.min_lr, .warmup_steps = o.warmup_steps, .total_steps = o.steps, .decay = o.schedule};
}

const char* optimizer_kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adam: return "adam";
    case OptimizerKind::adamw: return "adamw";
  }
  return "?";
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  return parse_choice(name, {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw}, optimizer_kind_name,
                      "optimizer");
}

void validate(const TrainerOptions& o) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("Trainer: " + what); };
  using L = TrainerLimits;
  if (!(o.lr > 0 && o.lr <= L::lr)) {
    fail("lr must lie in (0, " + format_number(L::lr) + "], got " + format_number(o.lr));
  }
  if (!(o.min_lr >= 0 && o.min_lr <= o.lr)) {
    fail("min_lr must lie in [0, lr=" + format_number(o.lr) + "], got " + format_number(o.min_lr));
  }
  if (!(o.weight_decay >= 0 && o.weight_decay <= L::lr)) {
    fail("weight_decay must lie in [0, " + format_number(L::lr) + "], got " + format_number(o.weight_decay));
  }
  if (!(o.momentum >= 0 && o.momentum < 1)) fail("momentum must lie in [0, 1), got " + format_number(o.momentum));
  if (o.steps < 1 || o.steps > L::steps) {
    fail("steps must lie in [1, " + std::to_string(L::steps) + "], got " + std::to_string(o.steps));
  }
  if (o.warmup_steps < 0 || o.warmup_steps > L::steps) {
    fail("warmup_steps must lie in [0, " + std::to_string(L::steps) + "], got " + std::to_string(o.warmup_steps));
  }
  if (o.schedule != LrDecay::constant && o.warmup_steps >= o.steps) {
    fail("warmup_steps " + std::to_string(o.warmup_steps) + " must be below steps " + std::to_string(o.steps) +
         " for a " + lr_decay_name(o.schedule) + " decay");
  }
  if (!(o.clip_norm >= 0 && o.clip_norm <= L::clip_norm)) {
    fail("clip_norm must lie in [0, " + format_number(L::clip_norm) + "] (0 turns clipping off), got " +
         format_number(o.clip_norm));
  }
  if (o.eval_every < 1 || o.eval_every > L::steps) {
    fail("eval_every must lie in [1, " + std::to_string(L::steps) + "], got " + std::to_string(o.eval_every));
  }
  if (!(o.target_seq_acc > 0)) {
    fail("target_seq_acc must be > 0 (above 1 never stops early), got " + format_number(o.target_seq_acc));
  }
  if (o.threads < 1 || o.threads > L::threads) {
    fail("threads must lie in [1, " + std::to_string(L::threads) + "], got " + std::to_string(o.threads));
  }
  LrSchedule check(schedule_options(o));  // the schedule's own checks
}

std::string trainer_options_to_json(const TrainerOptions& o) {
  return OrderedJson({{"optimizer", optimizer_kind_name(o.optimizer)},
                      {"lr", o.lr},
                      {"min_lr", o.min_lr},
                      {"weight_decay", o.weight_decay},
                      {"momentum", o.momentum},
                      {"warmup_steps", o.warmup_steps},
                      {"schedule", lr_decay_name(o.schedule)},
                      {"steps", o.steps},
                      {"clip_norm", o.clip_norm}})
      .dump();
}

TrainerOptions trainer_options_from_json(const std::string& text, const TrainerOptions& base) {
  const std::string op = "trainer_options_from_json: ";
  const Json j = parse_options_object(text,
                                      {"optimizer", "lr", "min_lr", "weight_decay", "momentum", "warmup_steps",
                                       "schedule", "steps", "clip_norm"},
                                      op);
  const OptionFields f{j, op, text};
  TrainerOptions o = base;
  o.optimizer = parse_optimizer_kind(f.string("optimizer"));
  o.lr = f.number("lr");
  o.min_lr = f.number("min_lr");
  o.weight_decay = f.number("weight_decay");
  o.momentum = f.number("momentum");
  o.warmup_steps = f.integer("warmup_steps");
  o.schedule = parse_lr_decay(f.string("schedule"));
  o.steps = f.integer("steps");
  o.clip_norm = f.number("clip_norm");
  validate(o);
  return o;
}

}  // namespace ag
