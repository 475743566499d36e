// The files a training run writes, checked before its first step and owned by it until it ends:
// a run that would fail at its first save, destroy a file the user has, or share an output with
// another run, fails at once with the reason instead.
//
//   OutputLocks held = prepare_outputs({{"--save", ckpt}, {"--log", log}, {"--plot", plot}},
//                                      {.resume = resumed, .inputs = {{"--data", text}}});
//
// For every output (an empty path is skipped): its directory is created when missing and must
// be writable; the path must not be a directory or a special file. No two outputs may be the
// same file, and no output may be a file the run reads (the inputs: --data, --resume, --config),
// with or without `overwrite`; "the same file" is the same device and inode when both exist (so
// symlinks and hard links count), or the same canonical path. An input may only be carried on
// by an output of its own kind: the checkpoint being resumed is saved over, and a configuration
// these programs wrote (kConfigMarker) is replaced by the run's configuration. Any other existing
// file is kept unless `overwrite`: an earlier run's metrics log, plot or configuration too, even at
// a path given explicitly. The exceptions replace nothing anyone made: an empty file, and a
// resumed run going on with a metrics log and plot of its own kind (told by how our writers start
// them, not by the file's type).
// Every refusal is std::invalid_argument naming the role (e.g. the flag) and the path.
//
// One owner per output: prepare_outputs() locks every output (flock on "<path>.lock", beside the
// file its symlinks lead to) and the returned OutputLocks holds them until it is destroyed; the
// kernel drops them when the process dies however it dies. A second run on a locked path is
// refused, naming the pid that holds it. A lock file whose process is gone is taken over; one
// that is not a lock of ours (a file of the user's named like one) is refused and kept. The lock
// files are removed when the locks are released. Hard links to one file under two names are not
// caught by the lock (they are by the checks above, within one run).
#pragma once

#include <string>
#include <vector>

namespace ag {

// `file`: what a program that is not a training run writes (a vocabulary, an export): an
// existing file there is replaced only with `overwrite`.
enum class OutputKind { checkpoint, metrics_log, plot, config, file };

// The first line of a configuration a program writes, and the comment near the top of the SVG
// plots: how prepare_outputs() recognises files it may replace.
inline constexpr const char* kConfigMarker = "# attograd configuration";
inline constexpr const char* kPlotMarker = "<desc>attograd metrics plot</desc>";
// What a lock file holds: this, then the holder's pid and a newline.
inline constexpr const char* kLockMarker = "attograd output lock held by pid ";

struct OutputFile {
  std::string role;  // how the user named it, e.g. "--save"
  std::string path;
  OutputKind kind = OutputKind::checkpoint;
};

// `file`: any other file a program reads (a checkpoint it exports, a base model's weights).
enum class InputKind { data, checkpoint, config, file };

struct InputFile {
  std::string role;  // how the user named it, e.g. "--data"
  std::string path;  // empty: none
  InputKind kind = InputKind::data;
};

struct OutputPolicy {
  std::string resume{};    // the checkpoint this run continues, empty for a fresh run
  bool overwrite = false;  // replace existing files of other runs
  std::vector<InputFile> inputs{};  // what the run reads: never written
};

// The locks on a run's outputs; released (and their files removed) when destroyed.
class OutputLocks {
 public:
  OutputLocks() = default;
  ~OutputLocks();
  OutputLocks(OutputLocks&& other) noexcept;
  OutputLocks& operator=(OutputLocks&& other) noexcept;
  OutputLocks(const OutputLocks&) = delete;
  OutputLocks& operator=(const OutputLocks&) = delete;

  // Locks `out` (see above); std::invalid_argument naming it when another process holds it.
  void add(const OutputFile& out);

 private:
  void release() noexcept;

  struct Held {
    std::string lock_path;
    int fd;
  };
  std::vector<Held> held_;
};

OutputLocks prepare_outputs(const std::vector<OutputFile>& outputs, const OutputPolicy& policy);

// A run's own directory under `root` (e.g. "runs/train_sequence/reverse"), so that no run
// replaces another's files: `name` when given, else the next free number (1, 2, ...: one more
// than the largest number there, claimed with mkdir, so two runs started together get two).
// A named directory that exists is refused (std::invalid_argument naming it and --run-name)
// unless `replace`. "<root>/latest" then points at it (a relative symlink, replaced atomically;
// a "latest" that is not a symlink is left alone). A name must be one path component, not
// "latest", "." or "..". Returns the directory's path.
std::string make_run_directory(const std::string& root, const std::string& name, bool replace);

}  // namespace ag
