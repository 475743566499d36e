// The main() of the training programs (train_sequence, train_gpt), written once: the command
// line (a UsageError exits 2 with a pointer to --help), --help, --version, --write-config (the
// effective configuration, written atomically, then exit 0), then the run, whose exception
// exits 1 with its message.
//
// Under mpirun (several processes) a rank that fails must not leave the others waiting in their
// next collective: its error, or a non-zero status of its run, ends the whole job through
// Communicator::abort, with the rank's message. Only rank 0 writes to stdout (see
// print_on_root_only).
#pragma once

#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "attograd/train/io/atomic_file.h"
#include "attograd/train/dist/communicator.h"
#include "attograd/train/io/outputs.h"
#include "train_sequence_cli.h"

namespace ag {

// In a run over several processes, every rank but 0 discards what it writes to stdout: one
// progress display, one summary. Errors still go to stderr from the rank that has them.
inline void print_on_root_only(const Communicator& comm) {
  if (!comm.is_root()) std::cout.rdbuf(nullptr);  // a stream without a buffer drops its output
}

// Args has help, version, overwrite, write_config_path and config_text, as TrainSequenceArgs and
// TrainGPTArgs do.
template <typename Args>
int training_program_main(int argc, char** argv, const char* name, Args (*parse)(const std::vector<std::string>&),
                          std::string (*usage)(const std::string&), int (*run)(const Args&)) {
  const std::string program = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : name;
  Args args;
  try {
    args = parse(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    std::cerr << program << ": " << e.what() << "\n(" << program << " --help lists the flags)\n";
    return 2;
  }
  if (args.help) {
    std::cout << usage(program);
    return 0;
  }
  if (args.version) {
    std::cout << "attograd " << ATTOGRAD_VERSION << "\n";
    return 0;
  }
  try {
    if (args.write_config_path.empty()) {
      const int status = run(args);
      Communicator& comm = Communicator::world();
      if (comm.size() > 1 && status != 0 && status != 130) {
        comm.abort(program + ": the run ended with status " + std::to_string(status), status);
      }
      return status;
    }
    if (!Communicator::world().is_root()) return 0;  // under mpirun one rank writes the file
    prepare_outputs({{"--write-config", args.write_config_path, OutputKind::config}}, {.overwrite = args.overwrite});
    write_file_atomically(args.write_config_path, args.config_text);
    std::cout << "wrote the configuration to " << args.write_config_path << " (run it with --config "
              << args.write_config_path << ")\n";
    return 0;
  } catch (const std::exception& e) {
    if (Communicator& comm = Communicator::world(); comm.size() > 1) comm.abort(program + ": error: " + e.what(), 1);
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ag
