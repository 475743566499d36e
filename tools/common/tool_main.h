// The main() of the programs that are not training runs (generate, evaluate, export_gpt,
// prepare_text, tokenize, train_bpe): parse the command line with CLI11 (numbers and paths
// checked by flags.h's validators), run, and turn what went wrong into an exit code with one
// message on stderr. Exit codes: 0 done, 1 error (a file, the system), 2 bad command line
// (UsageError).
//
//   int main(int argc, char** argv) {
//     Args args;
//     CLI::App app{"What the tool does.", tool_name(argc, argv, "tokenize")};
//     app.add_option(...);
//     return tool_main(app, argc, argv, [&] { return run(args); });
//   }
#pragma once

#include <CLI/CLI.hpp>

#include <exception>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>

#include "flags.h"

#ifndef ATTOGRAD_VERSION
#define ATTOGRAD_VERSION "unknown"
#endif

namespace ag {

inline std::string tool_name(int argc, char** argv, const char* fallback) {
  return argc > 0 ? std::filesystem::path(argv[0]).filename().string() : fallback;
}

template <typename Run>
int tool_main(CLI::App& app, int argc, char** argv, Run&& run) {
  const std::string program = app.get_name();
  app.set_version_flag("--version", std::string("attograd ") + ATTOGRAD_VERSION);
  const auto usage = [&](const std::string& what) {
    std::cerr << program << ": " << what << "\n(" << program << " --help lists the flags)\n";
    return 2;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage(e.what());
  }
  try {
    return run();
  } catch (const UsageError& e) {
    return usage(e.what());
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ag
