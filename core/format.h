// Numbers for messages, written the same way everywhere in the library.
//
//   format_number(0.005)   -> "0.005"      (as an ostream prints a double: 6 significant digits)
//   format_bytes(1536)     -> "1.5 KiB"    (binary units, one decimal; "512 bytes" below 1 KiB)
//
// And the two checks every options struct makes, with the same wording everywhere:
//   check_in_range("GPT: ", "n_layers", n, 1, 1024)   "GPT: n_layers must lie in [1, 1024], got 0"
//   constexpr Named<LrDecay> kLrDecayNames[] = {{LrDecay::constant, "constant"}, {LrDecay::cosine, "cosine"}};
//   name_of(kLrDecayNames, LrDecay::cosine)            "cosine"
//   named(kLrDecayNames, "x", "learning-rate schedule")
//                                                      "unknown learning-rate schedule 'x' (choose constant or cosine)"
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace ag {

std::string format_number(double value);
std::string format_bytes(double bytes);

// std::invalid_argument "<prefix><key> must lie in [low, high], got <value>" unless low <= value <= high.
void check_in_range(const std::string& prefix, const char* key, int64_t value, int64_t low, int64_t high);

// An enum value and its name. An enum's names are one table, read in both directions, so that a
// name is written once; the table lists the values in declaration order (a test per enum walks
// it).
template <typename E>
struct Named {
  E value;
  const char* name;
};

template <typename E, size_t N>
constexpr const char* name_of(const Named<E> (&names)[N], E value) {
  for (const Named<E>& n : names) {
    if (n.value == value) return n.name;
  }
  return "?";
}

// The value named `name`; std::invalid_argument naming `what`, the name and every choice otherwise.
template <typename E, size_t N>
E named(const Named<E> (&names)[N], const std::string& name, const char* what) {
  std::string list;
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i].name) return names[i].value;
    list += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i].name);
  }
  throw std::invalid_argument("unknown " + std::string(what) + " '" + name + "' (choose " + list + ")");
}

}  // namespace ag
