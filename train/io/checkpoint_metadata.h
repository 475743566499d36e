// The training loop's side of checkpoint metadata: reading one JSON entry with a clear error,
// and the loop's metrics window and clock. Internal to train/, not installed.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/json_text.h"

namespace ag {

// Parses one JSON metadata entry with `parse`, turning its std::invalid_argument (or JsonError)
// into the checkpoint's std::runtime_error, which names the file and the entry.
template <typename Parse>
auto parse_entry(const Checkpoint& checkpoint, const std::string& key, Parse parse) {
  const std::string& text = checkpoint.entry(key);
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("checkpoint '" + checkpoint.path() + "': metadata '" + key + "' is invalid: " + e.what());
  } catch (const JsonError& e) {
    throw std::runtime_error("checkpoint '" + checkpoint.path() + "': metadata '" + key + "' is invalid: " + e.what());
  }
}

// The metrics window and clock of the run, saved as the "loop" entry.
struct LoopState {
  int64_t step = 0;
  double window_loss_sum = 0;
  int64_t window_steps = 0;
  double elapsed_s = 0;
  double first_loss = 0;  // the run's first training loss, the reference for divergence; 0 = none yet
};

std::string loop_state_to_json(const LoopState& s);
// Checks every field (a step within TrainerLimits, a finite non-negative window and first
// loss, a plausible clock); first_loss may be absent (checkpoints written before it was saved).
LoopState loop_state_from_json(const std::string& text);

}  // namespace ag
