#include "attograd/train/io/checkpoint_metadata.h"

#include <cmath>
#include <optional>

#include "attograd/core/format.h"
#include "attograd/train/trainer.h"

namespace ag {

constexpr auto kLoopFields = [](auto& s, auto&& field) {
  field("step", s.step), field("window_loss_sum", s.window_loss_sum), field("window_steps", s.window_steps);
  field("elapsed_s", s.elapsed_s), field("first_loss", s.first_loss);
};

std::string loop_state_to_json(const LoopState& s) { return fields_to_json(s, kLoopFields).dump(); }

LoopState loop_state_from_json(const std::string& text) {
  const LoopState s = fields_from_json(text, kLoopFields, "", LoopState{});
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
