// What both libFuzzer targets share: a scratch file per process for the readers that take a
// path, and the one way a target reports a finding that is not a crash (a broken invariant).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace ag::fuzz {

// $TMPDIR when set, else /dev/shm (memory, no disk wear at thousands of writes a second), else
// /tmp. The process id keeps parallel workers (-jobs, -fork) apart. The file is removed at exit.
inline const std::string& scratch_path(const char* tag) {
  static const std::string path = [tag] {
    std::filesystem::path dir = "/tmp";
    std::error_code ec;
    if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
      dir = tmp;
    } else if (std::filesystem::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK) == 0) {
      dir = "/dev/shm";
    }
    const std::string p = (dir / ("attograd-fuzz-" + std::string(tag) + "-" + std::to_string(getpid()) +
                                  ".safetensors")).string();
    static std::string removed_at_exit;
    removed_at_exit = p;
    std::atexit([] { std::remove(removed_at_exit.c_str()); });
    return p;
  }();
  return path;
}

// Replaces the scratch file's contents with `bytes`. A failure here is the harness's, not the
// library's: abort so that it is not mistaken for a rejected input.
inline void write_scratch(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz harness: cannot write the scratch file %s\n", path.c_str());
    std::abort();
  }
}

// An invariant the library promises and the input broke: libFuzzer saves the input as a crash.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::abort();
}

}  // namespace ag::fuzz
