// --threads for every program: "auto" (the default: every core this process may run on, as
// ag::usable_cores counts them) or a count. Parsed as text and resolved with ag::parse_threads
// once the command line is read:
//
//   std::string threads = "auto";
//   add_threads_flag(app, threads, "threads for matrix products");
//   ...parse...
//   ag::set_num_threads(ag::parse_threads(threads));
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

#include "attograd/core/threads.h"

namespace ag {

inline CLI::Option* add_threads_flag(CLI::App& app, std::string& text, const std::string& help, int max = 256) {
  return app
      .add_option("--threads", text, help + ": auto (the cores this process may use) or a count")
      ->check(CLI::Validator(
          [max](std::string& value) -> std::string {
            try {
              parse_threads(value, max);
              return {};
            } catch (const std::invalid_argument& e) {
              return e.what();
            }
          },
          "auto|N"))
      ->capture_default_str();
}

}  // namespace ag
