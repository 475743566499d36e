// GPTTrainerOptions: validation and the JSON of the trajectory-shaping options that GPT
// checkpoints store (train/gpt_trainer.h).
#include <cmath>
#include <optional>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/train/gpt_trainer.h"
#include "attograd/train/json_text.h"

namespace ag {

void validate(const GPTTrainerOptions& o) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("GPTTrainer: " + what); };
  using L = TrainerLimits;
  const auto int_in = [&](const char* key, int64_t v, int64_t low, int64_t high) {
    if (v < low || v > high) {
      fail(std::string(key) + " must lie in [" + std::to_string(low) + ", " + std::to_string(high) + "], got " +
           std::to_string(v));
    }
  };
  int_in("batch", o.batch, 1, int64_t{1} << 20);
  if (!(o.lr > 0 && o.lr <= L::lr)) fail("lr must lie in (0, " + format_number(L::lr) + "], got " + format_number(o.lr));
  if (!(o.min_lr >= 0 && o.min_lr <= o.lr)) {
    fail("min_lr must lie in [0, lr=" + format_number(o.lr) + "], got " + format_number(o.min_lr));
  }
  if (!(o.weight_decay >= 0 && o.weight_decay <= L::lr)) {
    fail("weight_decay must lie in [0, " + format_number(L::lr) + "], got " + format_number(o.weight_decay));
  }
  int_in("steps", o.steps, 1, L::steps);
  int_in("warmup_steps", o.warmup_steps, 0, L::steps);
  if (o.warmup_steps >= o.steps) {
    fail("warmup_steps " + std::to_string(o.warmup_steps) + " must be below steps " + std::to_string(o.steps) +
         " (the cosine decay starts after the warm-up)");
  }
  if (!(o.clip_norm >= 0 && o.clip_norm <= L::clip_norm)) {
    fail("clip_norm must lie in [0, " + format_number(L::clip_norm) + "] (0 turns clipping off), got " +
         format_number(o.clip_norm));
  }
  if (!(o.train_fraction > 0 && o.train_fraction < 1)) {
    fail("train_fraction must lie in (0, 1), got " + format_number(o.train_fraction));
  }
  int_in("eval_every", o.eval_every, 1, L::steps);
  int_in("eval_windows", o.eval_windows, 1, int64_t{1} << 20);
  int_in("sample_tokens", o.sample_tokens, 0, int64_t{1} << 20);
  if (o.threads < 1 || o.threads > L::threads) {
    fail("threads must lie in [1, " + std::to_string(L::threads) + "], got " + std::to_string(o.threads));
  }
}

std::string gpt_trainer_options_to_json(const GPTTrainerOptions& o) {
  return OrderedJson({{"batch", o.batch},
                      {"lr", o.lr},
                      {"min_lr", o.min_lr},
                      {"weight_decay", o.weight_decay},
                      {"warmup_steps", o.warmup_steps},
                      {"steps", o.steps},
                      {"clip_norm", o.clip_norm},
                      {"seed", o.seed},
                      {"train_fraction", o.train_fraction}})
      .dump();
}

GPTTrainerOptions gpt_trainer_options_from_json(const std::string& text, const GPTTrainerOptions& base) {
  const std::string op = "gpt_trainer_options_from_json: ";
  const Json j = parse_options_object(
      text, {"batch", "lr", "min_lr", "weight_decay", "warmup_steps", "steps", "clip_norm", "seed", "train_fraction"},
      op);
  const auto field = [&](const char* key) -> const Json& {
    const auto it = j.find(key);
    if (it == j.end()) throw std::invalid_argument(op + "missing \"" + key + "\" in " + text);
    return *it;
  };
  const auto wrong = [&](const char* key, const char* type) {
    return std::invalid_argument(op + "\"" + key + "\" must be " + type + ", got " + field(key).dump());
  };
  const auto real = [&](const char* key) {
    if (!field(key).is_number()) throw wrong(key, "a number");
    return field(key).get<double>();
  };
  const auto integer = [&](const char* key) {
    const std::optional<int64_t> v = json_int64(field(key));
    if (!v) throw wrong(key, "an integer");
    return *v;
  };
  GPTTrainerOptions o = base;
  o.batch = integer("batch");
  o.lr = real("lr");
  o.min_lr = real("min_lr");
  o.weight_decay = real("weight_decay");
  o.warmup_steps = integer("warmup_steps");
  o.steps = integer("steps");
  o.clip_norm = real("clip_norm");
  // The seed is a full uint64 (nlohmann keeps non-negative integers as such).
  const Json& seed = field("seed");
  if (!seed.is_number_unsigned()) throw wrong("seed", "an unsigned integer");
  o.seed = seed.get<uint64_t>();
  o.train_fraction = real("train_fraction");
  try {
    validate(o);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(op + e.what());
  }
  return o;
}

}  // namespace ag
