// The files a training run writes, checked before its first step: a run that would fail at its
// first save, or destroy a file the user has, fails at once with the reason instead.
//
//   prepare_outputs({{"--save", ckpt}, {"--log", log}, {"--plot", plot}}, {.resume = resumed});
//
// For every output (an empty path is skipped): its directory is created when missing and must
// be writable; the path must not be a directory or a special file. No two outputs may be the
// same file (after symlinks and hard links), and no output but the checkpoint may be the
// checkpoint being resumed. An existing file is replaced only when it is what this output
// writes anyway: the checkpoint being resumed, our own metrics log, plot or configuration (told
// by how our writers start them, not by the file's type). Anything else (a
// checkpoint of another run, a file of the user's) needs `overwrite`. Every refusal is
// std::invalid_argument naming the role (e.g. the flag) and the path.
#pragma once

#include <string>
#include <vector>

namespace ag {

enum class OutputKind { checkpoint, metrics_log, plot, config };

// The first line of a configuration a program writes, and the comment near the top of the SVG
// plots: how prepare_outputs() recognises files it may replace.
inline constexpr const char* kConfigMarker = "# attograd configuration";
inline constexpr const char* kPlotMarker = "<desc>attograd metrics plot</desc>";

struct OutputFile {
  std::string role;  // how the user named it, e.g. "--save"
  std::string path;
  OutputKind kind = OutputKind::checkpoint;
};

struct OutputPolicy {
  std::string resume{};    // the checkpoint this run continues, empty for a fresh run
  bool overwrite = false;  // replace existing files of other runs
};

void prepare_outputs(const std::vector<OutputFile>& outputs, const OutputPolicy& policy);

}  // namespace ag
