// torch_parity: holds attograd against PyTorch, tensor by tensor.
//
//   build/tools/torch_parity tests/parity/fixtures/*.safetensors
//
// Each FILE is a fixture written from a PyTorch module (docs/parity.md; tests/parity/make_fixtures.py
// writes the committed ones). For each, the tool builds the same attograd module, loads the same
// parameters, runs forward and backward with the stored upstream gradient and prints a table of
// every output and gradient with its largest absolute and relative error. Exit status: 0 when
// every tensor is within tolerance, 1 when some is not, 2 for a malformed fixture.
#include <iostream>
#include <string>
#include <vector>

#include "parity/parity.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return ag::parity::run_tool(args, std::cout, std::cerr);
}
