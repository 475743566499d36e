// Numbers for messages, written the same way everywhere in the library.
//
//   format_number(0.005)   -> "0.005"      (as an ostream prints a double: 6 significant digits)
//   format_bytes(1536)     -> "1.5 KiB"    (binary units, one decimal; "512 bytes" below 1 KiB)
//
// And the two checks every options struct makes, with the same wording everywhere:
//   check_in_range("GPT: ", "n_layers", n, 1, 1024)   "GPT: n_layers must lie in [1, 1024], got 0"
//   parse_choice(name, {LrDecay::constant, LrDecay::cosine}, lr_decay_name, "learning-rate schedule")
//                                                      "unknown learning-rate schedule 'x' (choose constant or cosine)"
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace ag {

std::string format_number(double value);
std::string format_bytes(double bytes);

// std::invalid_argument "<prefix><key> must lie in [low, high], got <value>" unless low <= value <= high.
void check_in_range(const std::string& prefix, const char* key, int64_t value, int64_t low, int64_t high);

// The choice whose name_of() is `name`; std::invalid_argument naming `what`, the name and every choice otherwise.
template <typename E>
E parse_choice(const std::string& name, std::initializer_list<E> choices, const char* (*name_of)(E), const char* what) {
  std::string list;
  size_t i = 0;
  for (E choice : choices) {
    if (name == name_of(choice)) return choice;
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::string(name_of(choice));
    ++i;
  }
  throw std::invalid_argument("unknown " + std::string(what) + " '" + name + "' (choose " + list + ")");
}

}  // namespace ag
