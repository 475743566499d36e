// The command line of every attograd program, on CLI11, in one house style: numbers read whole
// and finite within their range ("12x", "1.5" for an integer, "0x10", NaN and infinities are
// refused, naming the flag and the range), choices listed, empty paths refused (an unset shell
// variable is never what the user meant), and a bad value a UsageError: exit 2, with the hint to
// read --help.
//
//   app.add_option("--batch", a.batch, "windows per pass")->check(integer_in<int64_t>(1, 1 << 16));
//   app.add_option("--val-fraction", a.fraction, "...")->check(real_in(0.0, 1.0, /*high_open=*/true));
//   app.add_option("--out", a.out, "...")->check(nonempty_path());
//
// The training programs declare theirs through Flags (grouped, and marked when a checkpoint
// decides them) and may read them from a TOML file (--config): the config file's checks, the
// message naming its key and line, and the paths it gives anchored to it are here too.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/train/io/outputs.h"

namespace ag {

// A command line that cannot run as given: the program exits 2 with it and the hint to read --help.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

// A number read whole (no "12x", no "1.5", no NaN: CLI11's Range lets NaN through, and a
// learning rate of NaN is no learning rate) within [low, high], without high when high_open and
// without low when low_open.
template <typename Number>
CLI::Validator number_in(Number low, Number high, bool high_open, const std::string& what, const std::string& shown,
                         bool low_open = false) {
  return {[=](std::string& text) -> std::string {
            Number v = 0;
            std::istringstream in(text);  // a real as a stream reads it ("+1e-3", blanks around it)
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            const bool whole = std::is_floating_point_v<Number> ? (in >> v) && (in >> std::ws).eof()
                                                                : ec == std::errc() && end == text.data() + text.size();
            if (!whole || !std::isfinite(static_cast<double>(v))) return "'" + text + "' is not " + what;
            const bool out = v < low || v > high || (high_open && v == high) || (low_open && v == low);
            return out ? text + " is out of range " + shown : "";
          },
          shown};
}

inline bool named_in(const std::vector<std::string>& argv, const std::string& flag) {
  return std::any_of(argv.begin(), argv.end(), [&](const std::string& a) { return a == flag || a.rfind(flag + "=", 0) == 0; });
}

// CLI11's message, plus the config file's key and line when the value came from there: the
// first `key = ...` line whose flag the message names and the command line does not give.
inline std::string explain(const std::string& message, const std::string& config_path,
                           const std::vector<std::string>& argv) {
  if (config_path.empty()) return message;
  std::ifstream in(config_path);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    // The key is the run of [A-Za-z0-9_.-] before '=' (blanks around it allowed).
    const size_t begin = line.find_first_not_of(" \t"), eq = line.find('=');
    if (begin == std::string::npos || eq == std::string::npos || eq <= begin) continue;
    std::string key = line.substr(begin, eq - begin);
    key.erase(key.find_last_not_of(" \t") + 1);
    const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-';
    });
    const std::string flag = "--" + key;
    const bool named = message.find(flag + ":") != std::string::npos || message.find(flag + " ") != std::string::npos ||
                       message.find(flag + "=") != std::string::npos || message.find("parse " + key) != std::string::npos ||
                       message.rfind(flag, 0) == 0;
    if (plain && named && !named_in(argv, flag)) {
      return "config file '" + config_path + "', line " + std::to_string(number) + ", key '" + key + "': " + message;
    }
  }
  return "config file '" + config_path + "': " + message;
}

// Where a shipped configuration is found by its name (`--config seq2seq-addition`): installed
// under the data directory, and in the source tree for programs run from the build tree.
#ifndef ATTOGRAD_CONFIG_DIRS
#define ATTOGRAD_CONFIG_DIRS ""
#endif

// The --config file named in argv ("" for none), looked at before CLI11 opens it: CLI11 would
// read anything, and a FIFO blocks while /dev/zero never ends. UsageError unless it is a
// regular file of at most 1 MiB. A plain name that is no file here is a shipped configuration
// (NAME.toml in ATTOGRAD_CONFIG_DIRS); argv's --config is then rewritten to that file.
inline std::string checked_config_path(std::vector<std::string>& argv) {
  size_t at = argv.size();  // the value's index
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i].rfind("--config=", 0) == 0) {
      const std::string value = argv[i].substr(9);
      argv[i] = "--config";
      argv.insert(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, value);
    }
    if (argv[i] == "--config" && i + 1 < argv.size()) at = i + 1;
  }
  if (at == argv.size() || argv[at].empty()) return "";
  std::string path = argv[at];
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && path.find('/') == std::string::npos) {
    std::istringstream dirs(ATTOGRAD_CONFIG_DIRS);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const std::string shipped = dir + "/" + path + (path.ends_with(".toml") ? "" : ".toml");
      if (!dir.empty() && std::filesystem::is_regular_file(shipped, ec)) {
        path = argv[at] = shipped;
        break;
      }
    }
  }
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw UsageError("--config: '" + path + "' does not exist");
  if (!std::filesystem::is_regular_file(status)) throw UsageError("--config: '" + path + "' is not a regular file");
  if (std::filesystem::file_size(path, ec) > (1u << 20)) {
    throw UsageError("--config: '" + path + "' is larger than 1 MiB, too large for a configuration");
  }
  return path;
}

// The program a configuration written by one of ours names on its first line (kConfigMarker
// " (run it with PROGRAM --config FILE)"); "" for any other file.
inline std::string configuration_writer(const std::string& config_path) {
  if (config_path.empty()) return "";
  std::ifstream in(config_path);
  std::string first;
  std::getline(in, first);
  const std::string lead = std::string(kConfigMarker) + " (run it with ";
  if (first.rfind(lead, 0) != 0) return "";
  const size_t end = first.find(' ', lead.size());
  return end == std::string::npos ? "" : first.substr(lead.size(), end - lead.size());
}

// Runs CLI11 over argv, every failure a UsageError that names the flag (and the config file's
// key and line). False when --version was asked for.
inline bool parse_command_line(CLI::App& app, const std::vector<std::string>& argv, const std::string& config_path) {
  try {
    std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11 takes them last first
    app.parse(reversed);
  } catch (const CLI::CallForVersion&) {
    return false;
  } catch (const CLI::ExtrasError&) {
    // CLI11 lists the leftovers; name the first one the way a user would look for it.
    const std::vector<std::string> rest = app.remaining();
    const std::string first = rest.empty() ? "?" : rest.front();
    throw UsageError(first.rfind('-', 0) == 0 ? "unknown flag " + first + " (see --help)"
                                              : "unexpected argument '" + first + "' (flags start with --; see --help)");
  } catch (const CLI::ParseError& e) {
    // A configuration another program wrote fails on its first key of that program's: say so.
    const std::string writer = configuration_writer(config_path);
    if (!writer.empty() && writer != app.get_name()) {
      throw UsageError("--config: '" + config_path + "' is " + writer + "'s configuration (its first line says so), not " +
                       app.get_name() + "'s: " + explain(e.what(), config_path, argv));
    }
    throw UsageError(explain(e.what(), config_path, argv));
  }
  return true;
}

// CLI11's TOML with our first line, and without the paths and lists of paths left empty (an
// empty path is refused when read back, and CLI11 writes an empty list as the string "[]";
// unset is what they were).
inline std::string configuration_text(const std::string& toml, const std::string& program) {
  std::istringstream in(toml);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.ends_with("=\"\"") || line.ends_with("=\"[]\"")) {
      if (!lines.empty() && lines.back().rfind('#', 0) == 0) lines.pop_back();  // its description
      continue;
    }
    lines.push_back(line);
  }
  std::string out = std::string(kConfigMarker) + " (run it with " + program + " --config FILE)\n";
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

}  // namespace detail

// A whole integer in [low, high]: "'12x' is not an integer", "300 is out of range [1, 256]".
template <typename Integer>
CLI::Validator integer_in(Integer low, Integer high) {
  const std::string range = "[" + std::to_string(low) + ", " + std::to_string(high) + "]";
  return detail::number_in(low, high, false, "an integer", range);
}

// A finite real in [low, high]; high_open leaves out high, low_open leaves out low: "(0, 1]".
inline CLI::Validator real_in(double low, double high, bool high_open = false, bool low_open = false) {
  const std::string range = (low_open ? "(" : "[") + format_number(low) + ", " + format_number(high) +
                            (high_open ? ")" : "]");
  return detail::number_in(low, high, high_open, "a finite number", range, low_open);
}

// Whatever the library's own parser of the value accepts (parse_activation, ...): its message
// when it throws, so a program never keeps a second list of the names.
template <typename Parse>
CLI::Validator parsed_by(Parse parse, const std::string& shown) {
  return {[parse](std::string& text) {
            try {
              (void)parse(text);
              return std::string();
            } catch (const std::exception& e) {
              return std::string(e.what());
            }
          },
          shown};
}

// One of `choices`, spelled exactly: "'x' is not one of a|b|c" otherwise. Every choice of every
// program is declared with this (Flags::choice, --quantize).
inline CLI::Validator one_of(std::vector<std::string> choices) {
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : "|") + c;
  return {[choices = std::move(choices), list](std::string& text) {
            return std::count(choices.begin(), choices.end(), text) ? std::string() : "'" + text + "' is not one of " + list;
          },
          list};
}

// Any unsigned 64-bit integer, as a --seed takes it ("-1" and 2^64 refused, not wrapped).
inline CLI::Validator any_seed() {
  return detail::number_in<uint64_t>(0, UINT64_MAX, false, "an unsigned 64-bit integer", "UINT64");
}

// A path that is not empty (what a variable that was never set expands to).
inline CLI::Validator nonempty_path() {
  return {[](std::string& p) { return p.empty() ? std::string("the path is empty") : std::string(); }, "PATH"};
}

// Declares a training program's flags in the house style above, each in a group of --help. The
// flags of a group marked from_checkpoint are what a resumed run takes from its checkpoint:
// refused next to --resume.
class Flags {
 public:
  explicit Flags(CLI::App& app) : app_(app) {}

  void group(const char* name, bool from_checkpoint) { group_ = name, from_checkpoint_ = from_checkpoint; }
  CLI::Option* integer(const char* flag, int64_t& into, int64_t low, int64_t high, const std::string& help) {
    return add(app_.add_option(flag, into, help)->check(integer_in(low, high)));
  }
  CLI::Option* real(const char* flag, double& into, double low, double high, const std::string& help,
                    bool high_open = false) {
    return add(app_.add_option(flag, into, help)->check(real_in(low, high, high_open)));
  }
  CLI::Option* choice(const char* flag, std::string& into, const std::string& help, std::vector<std::string> choices) {
    return add(app_.add_option(flag, into, help)->check(one_of(std::move(choices))));
  }
  // A path, anchored to a config file that gives it (anchor_paths); `is_name`, when given, says
  // which values are names rather than files (left as they are, e.g. --tokenizer gpt2).
  CLI::Option* path(const char* flag, std::string& into, const std::string& help,
                    std::function<bool(const std::string&)> is_name = {}) {
    paths_.push_back({flag, &into, std::move(is_name)});
    return add(app_.add_option(flag, into, help)->check(nonempty_path()));
  }
  // One or more paths (`--data a.txt b.txt`, or the flag repeated; a TOML array in a config),
  // each anchored as path() anchors its one, except the values `is_name` says are names.
  CLI::Option* paths(const char* flag, std::vector<std::string>& into, const std::string& help,
                     std::function<bool(const std::string&)> is_name) {
    path_lists_.push_back({flag, &into, std::move(is_name)});
    return add(app_.add_option(flag, into, help)->check(nonempty_path()));
  }
  CLI::Option* flag(const char* name, bool& into, const std::string& help) { return add(app_.add_flag(name, into, help)); }
  // One or more words that are not paths (`--freeze embed pos`, or the flag repeated), none empty.
  CLI::Option* words(const char* flag, std::vector<std::string>& into, const std::string& help) {
    const auto given = [](std::string& w) { return w.empty() ? std::string("the value is empty") : std::string(); };
    return add(app_.add_option(flag, into, help)->check(CLI::Validator(given, "TEXT")));
  }
  CLI::Option* seed(uint64_t& into, const std::string& help) {
    return add(app_.add_option("--seed", into, help)->check(any_seed()));
  }
  CLI::App& app() { return app_; }
  const std::vector<std::string>& from_checkpoint() const { return checkpointed_; }

  // A config file's paths are relative to the file: each relative path the file gave (not the
  // command line) is joined to its directory. The configuration then written names every path
  // absolutely, so that it means the same files wherever it is read from.
  void anchor_paths(const std::string& config_path, const std::vector<std::string>& argv) {
    namespace fs = std::filesystem;
    // The path the run reads (relative to the config file when the file gave it), and the
    // absolute one the written configuration says.
    const auto anchor = [&](const std::string& flag, std::string& path) {
      if (!config_path.empty() && !detail::named_in(argv, flag)) {
        path = (fs::path(config_path).parent_path() / path).lexically_normal().string();
      }
      return fs::absolute(path).lexically_normal().string();
    };
    for (auto& [flag, into, is_name] : paths_) {
      CLI::Option* option = app_.get_option(flag);
      if (option->count() == 0 || into->empty() || fs::path(*into).is_absolute()) continue;
      if (is_name && is_name(*into)) continue;
      const std::string written = anchor(flag, *into);
      option->clear();  // what the written configuration says
      option->add_result(written);
    }
    for (auto& [flag, into, is_name] : path_lists_) {
      CLI::Option* option = app_.get_option(flag);
      if (option->count() == 0 || into->empty()) continue;
      std::vector<std::string> written;
      for (std::string& p : *into) {
        const bool as_is = (is_name && is_name(p)) || fs::path(p).is_absolute();
        written.push_back(as_is ? p : anchor(flag, p));
      }
      option->clear();
      option->add_result(written);
    }
  }

 private:
  CLI::Option* add(CLI::Option* option) {
    option->group(group_);
    if (from_checkpoint_) checkpointed_.push_back(option->get_name());
    return option;
  }

  CLI::App& app_;
  struct PathFlag {
    std::string flag;
    std::string* into;
    std::function<bool(const std::string&)> is_name;
  };
  std::vector<PathFlag> paths_;
  struct PathList {
    std::string flag;
    std::vector<std::string>* into;
    std::function<bool(const std::string&)> is_name;
  };
  std::vector<PathList> path_lists_;
  std::string group_ = "options";
  bool from_checkpoint_ = false;
  std::vector<std::string> checkpointed_;
};

// The parsed command line, as a program's finish() sees it.
struct CommandLine {
  const CLI::App& app;
  const std::vector<std::string>& argv;
  bool resuming;

  // Given at all (command line or config file), or on the command line itself: a written
  // configuration lists every flag, so "the user asked for --shift-k" means the command line.
  bool given(const char* flag) const { return app.count(flag) > 0; }
  bool typed(const std::string& flag) const { return detail::named_in(argv, flag); }
  // A choice's text through its parser; the parser's complaint as a UsageError naming the flag.
  template <typename Parse>
  auto choice(const char* flag, Parse parse, const std::string& value) const {
    try {
      return parse(value);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string(flag) + ": " + e.what());
    }
  }
};

}  // namespace ag
