// Numbers for messages, written the same way everywhere in the library.
//
//   format_number(0.005)   -> "0.005"      (as an ostream prints a double: 6 significant digits)
//   format_bytes(1536)     -> "1.5 KiB"    (binary units, one decimal; "512 bytes" below 1 KiB)
#pragma once

#include <string>

namespace ag {

std::string format_number(double value);
std::string format_bytes(double bytes);

}  // namespace ag
