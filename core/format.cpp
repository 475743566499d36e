#include "attograd/core/format.h"

#include <cstdio>
#include <iterator>
#include <sstream>

namespace ag {

std::string format_number(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    bytes /= 1024;
    ++unit;
  }
  char text[64];
  if (unit == 0) std::snprintf(text, sizeof text, "%.0f bytes", bytes);
  else std::snprintf(text, sizeof text, "%.1f %s", bytes, kUnits[unit]);
  return text;
}

void check_in_range(const std::string& prefix, const char* key, int64_t value, int64_t low, int64_t high) {
  if (value < low || value > high) {
    throw std::invalid_argument(prefix + key + " must lie in [" + std::to_string(low) + ", " + std::to_string(high) +
                                "], got " + std::to_string(value));
  }
}

}  // namespace ag
