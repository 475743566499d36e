#include "attograd/train/io/outputs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

namespace ag {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void refuse(const OutputFile& out, const std::string& why) {
  throw std::invalid_argument(out.role + " '" + out.path + "': " + why);
}

std::optional<struct stat> stat_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

// The first bytes of a regular file (enough to tell what it is).
std::string head_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(512, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

// Whether an existing file is what this kind of output writes, so replacing it loses nothing new.
bool is_own_kind(const OutputFile& out, const std::string& head) {
  switch (out.kind) {
    case OutputKind::checkpoint: return false;  // a checkpoint always belongs to some run
    // What our own writers put first (metrics_log.cpp, plot.cpp, the programs' configurations):
    // a user's JSON, SVG or TOML file that merely looks alike is not replaced.
    case OutputKind::metrics_log: return head.empty() || head.rfind("{\"step\":", 0) == 0;
    case OutputKind::plot:
      // Plots written before the marker existed begin with plot.cpp's exact opening lines.
      return head.find(kPlotMarker) != std::string::npos ||
             (head.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", 0) == 0 &&
              head.find("font-family=\"sans-serif\" font-size=\"12\">\n<title>") != std::string::npos);
    case OutputKind::config: return head.empty() || head.rfind(kConfigMarker, 0) == 0;
  }
  return false;
}

const char* kind_name(const OutputKind kind) {
  switch (kind) {
    case OutputKind::checkpoint: return "a checkpoint";
    case OutputKind::metrics_log: return "a metrics log";
    case OutputKind::plot: return "a plot";
    case OutputKind::config: return "a configuration";
  }
  return "an output";
}

void prepare_one(const OutputFile& out, const OutputPolicy& policy) {
  const fs::path path(out.path);
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) refuse(out, "cannot create its directory '" + parent.string() + "': " + ec.message());
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    refuse(out, "its directory '" + parent.string() + "' is not writable: " + std::strerror(errno));
  }
  const std::optional<struct stat> st = stat_of(out.path);
  if (!st) return;  // a new file
  if (S_ISDIR(st->st_mode)) refuse(out, "is a directory; give a file name inside it");
  if (!S_ISREG(st->st_mode)) refuse(out, "exists and is not a regular file");
  const bool resumed = !policy.resume.empty() && fs::equivalent(out.path, policy.resume, ec);
  if (resumed) {
    if (out.kind != OutputKind::checkpoint) {
      refuse(out, "is the checkpoint being resumed; writing " + std::string(kind_name(out.kind)) +
                      " there would destroy it");
    }
    return;  // the run continues its own checkpoint
  }
  if (policy.overwrite || is_own_kind(out, head_of(out.path))) return;
  if (out.kind == OutputKind::checkpoint) {
    refuse(out, "already holds a file, perhaps the checkpoint of another run; continue that run with --resume " +
                    out.path + ", or replace it with --overwrite");
  }
  refuse(out, "already holds a file that is not " + std::string(kind_name(out.kind)) +
                  "; choose another path, or replace it with --overwrite");
}

}  // namespace

void prepare_outputs(const std::vector<OutputFile>& outputs, const OutputPolicy& policy) {
  // Two roles, one file: whichever is written last would destroy the other.
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      const OutputFile& a = outputs[i];
      const OutputFile& b = outputs[j];
      if (a.path.empty() || b.path.empty()) continue;
      std::error_code ec;
      const bool same = fs::exists(a.path, ec) && fs::exists(b.path, ec)
                            ? fs::equivalent(a.path, b.path, ec)  // symlinks and hard links
                            : fs::weakly_canonical(a.path, ec) == fs::weakly_canonical(b.path, ec);
      if (same) {
        throw std::invalid_argument(a.role + " '" + a.path + "' and " + b.role + " '" + b.path +
                                    "' are the same file; each output needs its own");
      }
    }
  }
  for (const OutputFile& out : outputs) {
    if (!out.path.empty()) prepare_one(out, policy);
  }
}

}  // namespace ag
