#include "attograd/train/io/outputs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <thread>

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
    case OutputKind::file: return false;
  }
  return false;
}

const char* kind_name(const OutputKind kind) {
  switch (kind) {
    case OutputKind::checkpoint: return "a checkpoint";
    case OutputKind::metrics_log: return "a metrics log";
    case OutputKind::plot: return "a plot";
    case OutputKind::config: return "a configuration";
    case OutputKind::file: return "a file";
  }
  return "an output";
}

// Whether two paths name one file: the same device and inode when both exist (through symlinks
// and hard links), else the same canonical path (for a file still to be written).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  const auto canonical = [](const std::string& path) {
    std::error_code error;
    const fs::path resolved = fs::weakly_canonical(path, error);
    return error ? fs::absolute(path, error).lexically_normal() : resolved;
  };
  return canonical(a) == canonical(b);
}

// Whether `out` may write over the input it is the same file as: only an output that carries
// that input on (the resumed checkpoint saved over; a configuration of ours replaced by the run's).
bool carries_on(const OutputFile& out, const InputFile& in) {
  switch (in.kind) {
    case InputKind::data: return false;
    case InputKind::checkpoint: return out.kind == OutputKind::checkpoint;
    case InputKind::config: return out.kind == OutputKind::config && is_own_kind(out, head_of(in.path));
    case InputKind::file: return false;
  }
  return false;
}

std::string what_input_is(const InputFile& in) {
  switch (in.kind) {
    case InputKind::data: return "the text " + in.role + " reads";
    case InputKind::checkpoint: return "the checkpoint being resumed";
    case InputKind::config: return "the configuration " + in.role + " reads";
    case InputKind::file: return "the file " + in.role + " reads";
  }
  return "an input";
}

// The output's directory exists and is writable, and the path is not a directory or a special
// file: checked before the lock, whose file would otherwise go inside such a directory.
void prepare_place(const OutputFile& out) {
  const fs::path path(out.path);
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) refuse(out, "cannot create its directory '" + parent.string() + "': " + ec.message());
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    refuse(out, "its directory '" + parent.string() + "' is not writable: " + std::strerror(errno));
  }
  const std::optional<struct stat> st = stat_of(out.path);
  if (st && S_ISDIR(st->st_mode)) refuse(out, "is a directory; give a file name inside it");
  if (st && !S_ISREG(st->st_mode)) refuse(out, "exists and is not a regular file");
}

// An existing file at `out`: replaced only when this output carries it on (the resumed checkpoint,
// a configuration read), when it is empty, when a resumed run goes on with its own metrics log and
// plot, or with --overwrite. A fresh run never replaces an earlier run's log, plot or
// configuration unasked, even at a path given explicitly.
void check_existing(const OutputFile& out, const std::vector<InputFile>& inputs, const OutputPolicy& policy) {
  const std::optional<struct stat> st = stat_of(out.path);
  if (!st) return;  // a new file
  for (const InputFile& in : inputs) {
    if (!in.path.empty() && same_file(out.path, in.path)) return;  // carried on (anything else was refused)
  }
  if (policy.overwrite || st->st_size == 0) return;
  if (out.kind == OutputKind::file) refuse(out, "exists; give --overwrite to replace it");
  const bool ours = is_own_kind(out, head_of(out.path));
  if (ours && !policy.resume.empty()) return;  // the resumed run's log and plot go on
  if (out.kind == OutputKind::checkpoint) {
    refuse(out, "already holds a file, perhaps the checkpoint of another run; continue that run with --resume " +
                    out.path + ", or replace it with --overwrite");
  }
  if (ours) {
    refuse(out, "already holds " + std::string(kind_name(out.kind)) +
                    " of an earlier run; choose another path (without the flag every run gets a directory of its "
                    "own), or replace it with --overwrite");
  }
  refuse(out, "already holds a file that is not " + std::string(kind_name(out.kind)) +
                  "; choose another path, or replace it with --overwrite");
}

// The pid a lock file names, waiting a little for a holder that has locked but not yet written.
std::string lock_holder(int fd) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    char text[64] = {};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    const std::string content(text, n > 0 ? static_cast<size_t>(n) : 0);
    const std::string marker = kLockMarker;
    if (content.rfind(marker, 0) == 0 && content.back() == '\n') {
      return "pid " + content.substr(marker.size(), content.size() - marker.size() - 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "a process that has not written its pid yet";
}

}  // namespace

OutputLocks::~OutputLocks() { release(); }

OutputLocks::OutputLocks(OutputLocks&& other) noexcept : held_(std::move(other.held_)) { other.held_.clear(); }

OutputLocks& OutputLocks::operator=(OutputLocks&& other) noexcept {
  if (this != &other) {
    release();
    held_ = std::move(other.held_);
    other.held_.clear();
  }
  return *this;
}

void OutputLocks::release() noexcept {
  for (const Held& h : held_) {
    // Removed while still locked, so that nobody locks it after us believing it current; and only
    // when the name still leads to our file.
    struct stat mine {}, there {};
    if (::fstat(h.fd, &mine) == 0 && ::stat(h.lock_path.c_str(), &there) == 0 && mine.st_dev == there.st_dev &&
        mine.st_ino == there.st_ino) {
      ::unlink(h.lock_path.c_str());
    }
    ::close(h.fd);
  }
  held_.clear();
}

void OutputLocks::add(const OutputFile& out) {
  // Beside the file a symlink leads to, so that two names of one file share one lock; absolute,
  // so that its name means one file however it is spelled.
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(out.path, ec);
  const std::string lock_path = fs::absolute(ec ? fs::path(out.path) : target, ec).string() + ".lock";
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    if (fd < 0) refuse(out, "cannot create its lock file '" + lock_path + "': " + std::strerror(errno));
    const auto fail = [&](const std::string& why) {
      ::close(fd);
      refuse(out, why);
    };
    struct stat opened {};
    if (::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode)) {
      fail("its lock file '" + lock_path + "' is not a regular file; move it away");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err != EWOULDBLOCK) fail("cannot lock '" + lock_path + "': " + std::strerror(err));
      fail("is in use by another run (" + lock_holder(fd) + ", which holds '" + lock_path +
           "'); wait for it to end, or choose another path");
    }
    // Its last holder may have removed the file between our open and our lock: lock what is there now.
    struct stat now {};
    if (::stat(lock_path.c_str(), &now) != 0 || now.st_dev != opened.st_dev || now.st_ino != opened.st_ino) {
      ::close(fd);
      continue;
    }
    // Free: a lock of a process that is gone is taken over; a file of the user's is left alone.
    char head[64] = {};
    const ssize_t n = ::pread(fd, head, sizeof head - 1, 0);
    if (n > 0 && std::string(head, static_cast<size_t>(n)).rfind(kLockMarker, 0) != 0) {
      fail("'" + lock_path + "' exists and is not a lock of these programs; move it away (it was left as it is)");
    }
    const std::string mine = kLockMarker + std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, mine.data(), mine.size(), 0) != static_cast<ssize_t>(mine.size())) {
      fail("cannot write its lock file '" + lock_path + "': " + std::strerror(errno));
    }
    held_.push_back({lock_path, fd});
    return;
  }
  refuse(out, "its lock file '" + lock_path + "' keeps being replaced by other processes");
}

OutputLocks prepare_outputs(const std::vector<OutputFile>& outputs, const OutputPolicy& policy) {
  // Two roles, one file: whichever is written last would destroy the other.
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      const OutputFile& a = outputs[i];
      const OutputFile& b = outputs[j];
      if (!a.path.empty() && !b.path.empty() && same_file(a.path, b.path)) {
        throw std::invalid_argument(a.role + " '" + a.path + "' and " + b.role + " '" + b.path +
                                    "' are the same file; each output needs its own");
      }
    }
  }
  // What the run reads is never written, whatever --overwrite says, but for what carries it on.
  std::vector<InputFile> inputs = policy.inputs;
  if (!policy.resume.empty()) inputs.push_back({"--resume", policy.resume, InputKind::checkpoint});
  for (const OutputFile& out : outputs) {
    for (const InputFile& in : inputs) {
      if (out.path.empty() || in.path.empty() || !same_file(out.path, in.path) || carries_on(out, in)) continue;
      refuse(out, "is " + what_input_is(in) + " ('" + in.path + "'); writing " + kind_name(out.kind) +
                      " there would destroy it (--overwrite does not change that); choose another path");
    }
  }
  OutputLocks locks;
  for (const OutputFile& out : outputs) {
    if (out.path.empty()) continue;
    prepare_place(out);
    locks.add(out);
  }
  for (const OutputFile& out : outputs) {
    if (!out.path.empty()) check_existing(out, inputs, policy);
  }
  return locks;
}

std::string make_run_directory(const std::string& root, const std::string& name, bool replace) {
  namespace fs = std::filesystem;
  if (name == "latest" || name == "." || name == ".." || name.find('/') != std::string::npos) {
    throw std::invalid_argument("--run-name: '" + name + "' must be a plain name (no '/', not latest, . or ..)");
  }
  fs::create_directories(root);
  fs::path dir;
  if (!name.empty()) {
    dir = fs::path(root) / name;
    if (!fs::create_directory(dir) && !replace) {
      throw std::invalid_argument("--run-name: '" + dir.string() +
                                  "' already holds a run (choose another name, or --overwrite to replace its files)");
    }
  } else {
    uint64_t next = 1;
    for (const fs::directory_entry& e : fs::directory_iterator(root)) {
      const std::string n = e.path().filename().string();
      if (!n.empty() && n.size() < 19 && std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        next = std::max<uint64_t>(next, std::stoull(n) + 1);
      }
    }
    while (!fs::create_directory(dir = fs::path(root) / std::to_string(next))) ++next;  // taken meanwhile
  }
  const fs::path latest = fs::path(root) / "latest";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(latest, ec)) || fs::is_symlink(fs::symlink_status(latest, ec))) {
    const fs::path tmp = fs::path(root) / (".latest-" + std::to_string(::getpid()));
    fs::remove(tmp, ec);
    fs::create_directory_symlink(dir.filename(), tmp);
    fs::rename(tmp, latest);  // atomic: a reader sees the old run or the new one
  }
  return dir.string();
}

}  // namespace ag
