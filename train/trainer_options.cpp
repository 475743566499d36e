// TrainerOptions: names of the choices, validation against TrainerLimits, and the JSON of the
// trajectory-shaping options that checkpoints store (train/trainer.h).
#include <cmath>
#include <optional>
#include <string>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/trainer.h"

namespace ag {

LrScheduleOptions schedule_options(const TrainerOptions& o) {
  return {.lr = o.lr, .min_lr = o.min_lr, .warmup_steps = o.warmup_steps, .total_steps = o.steps, .decay = o.schedule};
}

constexpr Named<OptimizerKind> kOptimizerNames[] = {
    {OptimizerKind::sgd, "sgd"}, {OptimizerKind::adam, "adam"}, {OptimizerKind::adamw, "adamw"}};

const char* optimizer_kind_name(OptimizerKind kind) { return name_of(kOptimizerNames, kind); }

OptimizerKind parse_optimizer_kind(const std::string& name) { return named(kOptimizerNames, name, "optimizer"); }

constexpr Named<DecayParams> kDecayParamsNames[] = {{DecayParams::all, "all"}, {DecayParams::matrices, "matrices"}};

const char* decay_params_name(DecayParams which) { return name_of(kDecayParamsNames, which); }

DecayParams parse_decay_params(const std::string& name) {
  return named(kDecayParamsNames, name, "set of decayed parameters");
}

bool decays(const std::string& name, const Shape& shape, DecayParams which) {
  switch (which) {
    case DecayParams::all:
      return true;
    case DecayParams::matrices: {
      const size_t last_dot = name.rfind('.');
      const std::string module = last_dot == std::string::npos ? "" : name.substr(0, last_dot);
      const std::string own = module.substr(module.rfind('.') + 1);  // the whole path when it has no dot
      const bool table = name.substr(last_dot + 1) == "weight" &&
                         (own == "pos" || own == "wte" || own == "wpe" || own.ends_with("embed"));
      return shape.rank() >= 2 && !table;
    }
  }
  throw std::logic_error("decays: unknown DecayParams");
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
  if (!(o.beta1 >= 0 && o.beta1 < 1)) fail("beta1 must lie in [0, 1), got " + format_number(o.beta1));
  if (!(o.beta2 >= 0 && o.beta2 < 1)) fail("beta2 must lie in [0, 1), got " + format_number(o.beta2));
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
  if (o.grad_accum < 1 || o.grad_accum > L::grad_accum) {
    fail("grad_accum must lie in [1, " + std::to_string(L::grad_accum) + "], got " + std::to_string(o.grad_accum));
  }
  if (o.threads < 1 || o.threads > L::threads) {
    fail("threads must lie in [1, " + std::to_string(L::threads) + "], got " + std::to_string(o.threads));
  }
  LrSchedule check(schedule_options(o));  // the schedule's own checks
}

// The options that shape the trajectory, in the order checkpoints list them (json_text.h).
// Checkpoints written before the betas, the decayed set and micro-batches existed lack them
// (kKeepIfAbsent).
constexpr auto kTrainerFields = [](auto& o, auto&& field) {
  field("optimizer", o.optimizer, optimizer_kind_name, parse_optimizer_kind);
  field("lr", o.lr), field("min_lr", o.min_lr), field("weight_decay", o.weight_decay), field("momentum", o.momentum);
  field("warmup_steps", o.warmup_steps), field("schedule", o.schedule, lr_decay_name, parse_lr_decay);
  field("steps", o.steps), field("clip_norm", o.clip_norm);
  field("beta1", o.beta1, kKeepIfAbsent), field("beta2", o.beta2, kKeepIfAbsent);
  field("decay", o.decay, decay_params_name, parse_decay_params, kKeepIfAbsent);
  field("grad_accum", o.grad_accum, kKeepIfAbsent);
};

std::string trainer_options_to_json(const TrainerOptions& o) { return fields_to_json(o, kTrainerFields).dump(); }

TrainerOptions trainer_options_from_json(const std::string& text, const TrainerOptions& base) {
  const std::string op = "trainer_options_from_json: ";
  // A field that `text` predates takes the value every run had before the field existed, today's
  // default, whatever `base` holds: over the defaults' JSON first, so only base's observing
  // options stay.
  const TrainerOptions start = fields_from_json(trainer_options_to_json(TrainerOptions{}), kTrainerFields, op, base);
  return validated(fields_from_json(text, kTrainerFields, op, start), op);
}

}  // namespace ag
