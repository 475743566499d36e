// Every benchmark program's main() through one guard: whatever a run throws (a file that is no
// weights file, a size that cannot be allocated) ends it with one "PROGRAM: error: ..." line on
// stderr and exit 1, never std::terminate.
#pragma once

#include <exception>
#include <iostream>

namespace ag::bench {

template <typename Main>
int guarded_main(const char* program, Main&& main) {
  try {
    return main();
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ag::bench
