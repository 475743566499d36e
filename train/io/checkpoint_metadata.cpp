#include "attograd/train/io/checkpoint_metadata.h"

#include <cmath>
#include <optional>

#include "attograd/core/format.h"
#include "attograd/train/trainer.h"

namespace ag {

std::string loop_state_to_json(const LoopState& s) {
  return OrderedJson({{"step", s.step},
                      {"window_loss_sum", s.window_loss_sum},
                      {"window_steps", s.window_steps},
                      {"elapsed_s", s.elapsed_s},
                      {"first_loss", s.first_loss}})
      .dump();
}

LoopState loop_state_from_json(const std::string& text) {
  // first_loss is absent from checkpoints written before it was saved.
  const Json j = parse_options_object(text, {"step", "window_loss_sum", "window_steps", "elapsed_s", "first_loss"}, "");
  const std::string op;
  const OptionFields f{j, op, text};
  LoopState s;
  s.step = f.integer("step");
  s.window_loss_sum = f.number("window_loss_sum");
  s.window_steps = f.integer("window_steps");
  s.elapsed_s = f.number("elapsed_s");
  if (j.contains("first_loss")) s.first_loss = f.number("first_loss");
  if (!(s.first_loss >= 0 && std::isfinite(s.first_loss))) {
    throw std::invalid_argument("first_loss " + format_number(s.first_loss) + " is not a finite loss");
  }
  if (s.step < 0 || s.step > TrainerLimits::steps || s.window_steps < 0 || s.window_steps > s.step) {
    throw std::invalid_argument("step " + std::to_string(s.step) + " and window_steps " +
                                std::to_string(s.window_steps) + " are inconsistent (need 0 <= window_steps <= step <= " +
                                std::to_string(TrainerLimits::steps) + ")");
  }
  if (!(s.elapsed_s >= 0 && s.elapsed_s < 1e10)) {
    throw std::invalid_argument("elapsed_s " + format_number(s.elapsed_s) + " is not a duration in seconds");
  }
  if (!(s.window_loss_sum >= 0 && std::isfinite(s.window_loss_sum))) {
    throw std::invalid_argument("window_loss_sum " + format_number(s.window_loss_sum) + " is not a finite sum of losses");
  }
  return s;
}

}  // namespace ag
