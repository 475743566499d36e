// The command line of examples/train_sequence, parsed apart from main() so that the tests can
// feed it bad flags (tests/train/test_trainer.cpp).
//
//   TrainSequenceArgs args = parse_train_sequence_args({"--task", "sort", "--steps=3000"});
//
// Flags take their value as the next argument or after '='. Every problem (an unknown flag, a
// missing value, a value that is not a number, a number out of range, flags that contradict
// each other) is a UsageError whose message names the flag; main() prints it and exits with 2.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/trainer.h"

namespace ag {

class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct TrainSequenceArgs {
  TaskOptions task;             // seed = --seed
  SequenceModelOptions model;   // vocab and max_len follow the task
  TrainerOptions trainer;
  uint64_t seed = 0;            // the initialisation, the dropout masks and the training data
  std::string save_path;        // checkpoint, written at every evaluation and at the end
  std::string resume_path;
  std::string log_path;         // empty: runs/<task>/metrics.jsonl
  std::string plot_path;        // empty: runs/<task>/plot.svg
  bool overwrite = false;       // replace an existing checkpoint or file of another run
  bool quiet = false;
  bool help = false;
  std::set<std::string> given;  // the flags on the command line, e.g. "--lr"
};

// The defaults shown are read from the option structs, so the text cannot drift from them.
inline std::string train_sequence_usage(const std::string& program) {
  const TaskOptions task;
  const SequenceModelOptions model;
  const TrainerOptions trainer;
  std::ostringstream os;
  os << "usage: " << program << " [flags]\n"
     << "Trains a small transformer encoder on a toy sequence task and reports held-out accuracy.\n"
     << "The defaults train `reverse` (length 16, vocab 16) to 99% exact-sequence accuracy in seconds.\n\n"
     << "task\n"
     << "  --task copy|reverse|sort|shift   what to learn (default " << task_name(task.kind) << ")\n"
     << "  --shift-k K        rotation of the shift task, 1 <= K < length (default " << task.shift << ")\n"
     << "  --vocab V          tokens 0..V-1, V >= 2 (default " << task.vocab_size << ")\n"
     << "  --length T         sequence length, 1..4096 (default " << task.seq_len << ")\n"
     << "model\n"
     << "  --d-model D        width (default " << model.d_model << ")\n"
     << "  --heads H          attention heads, must divide D (default " << model.n_head << ")\n"
     << "  --d-ff F           feed-forward width (default " << model.d_ff << ")\n"
     << "  --layers L         encoder blocks (default " << model.n_layers << ")\n"
     << "  --pre-norm | --post-norm   LayerNorm placement (default " << (model.norm_first ? "pre" : "post")
     << "-norm)\n"
     << "  --positional learned|sinusoidal   position embedding (default " << positional_kind_name(model.positional)
     << ")\n"
     << "  --dropout P        in [0, 1) (default " << model.dropout << ")\n"
     << "optimisation\n"
     << "  --optimizer sgd|adam|adamw   (default " << optimizer_kind_name(trainer.optimizer) << ")\n"
     << "  --lr LR            peak learning rate (default " << trainer.lr << ")\n"
     << "  --min-lr LR        learning rate at the end of the decay (default " << trainer.min_lr << ")\n"
     << "  --weight-decay W   L2 (sgd, adam) or decoupled (adamw) (default " << trainer.weight_decay << ")\n"
     << "  --momentum M       SGD momentum in [0, 1) (default " << trainer.momentum << ")\n"
     << "  --warmup N         linear warm-up steps (default " << trainer.warmup_steps << ")\n"
     << "  --schedule constant|cosine|linear   decay after warm-up (default " << lr_decay_name(trainer.schedule)
     << ")\n"
     << "  --clip C           max gradient norm, 0 = off (default " << trainer.clip_norm << ")\n"
     << "  --steps N          step budget and end of the decay (default " << trainer.steps << ")\n"
     << "  --batch B          sequences per step (default " << task.batch_size << ")\n"
     << "  --seed S           initialisation, dropout and training data (default " << task.seed << ")\n"
     << "evaluation and output\n"
     << "  --eval-every N     evaluate on held-out sequences every N steps (default " << trainer.eval_every << ")\n"
     << "  --eval-sequences N held-out sequences per evaluation (default " << trainer.eval_sequences << ")\n"
     << "  --target-acc A     stop at this held-out exact-sequence accuracy, in (0, 1] (default "
     << trainer.target_seq_acc << ")\n"
     << "  --threads N        threads for matrix products (default " << trainer.threads
     << "; more rarely pays off on models this small)\n"
     << "  --save PATH        checkpoint (safetensors) at every evaluation and at the end\n"
     << "  --resume PATH      continue the run saved in PATH (model, task and optimizer come from it)\n"
     << "  --log PATH         metrics, one JSON line per evaluation (default runs/<task>/metrics.jsonl)\n"
     << "  --plot PATH        SVG plot of loss and accuracy (default runs/<task>/plot.svg)\n"
     << "  --overwrite        let --save, --log and --plot replace files of another run\n"
     << "  --quiet            no progress output, only the summary\n"
     << "  --help, -h         this text\n";
  return os.str();
}

namespace detail {

inline int64_t parse_int_flag(const std::string& flag, const std::string& text, int64_t low, int64_t high) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    throw UsageError(flag + ": '" + text + "' is not an integer");
  }
  if (v < low || v > high) {
    throw UsageError(flag + ": " + text + " is out of range [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  return v;
}

inline uint64_t parse_u64_flag(const std::string& flag, const std::string& text) {
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    throw UsageError(flag + ": '" + text + "' is not an unsigned 64-bit integer");
  }
  return v;
}

// A finite number in [low, high] (or [low, high) when high_open).
inline double parse_real_flag(const std::string& flag, const std::string& text, double low, double high,
                              bool high_open = false) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) {
    throw UsageError(flag + ": '" + text + "' is not a finite number");
  }
  if (v < low || v > high || (high_open && v == high)) {
    std::ostringstream os;
    os << flag << ": " << text << " is out of range [" << low << ", " << high << (high_open ? ")" : "]");
    throw UsageError(os.str());
  }
  return v;
}

// Runs `parse` on a value, turning the library's std::invalid_argument into a UsageError.
template <typename Parse>
auto parse_choice(const std::string& flag, const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(flag + ": " + e.what());
  }
}

}  // namespace detail

inline TrainSequenceArgs parse_train_sequence_args(const std::vector<std::string>& argv) {
  using namespace detail;
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
  using ML = SequenceModelLimits;
  using TL = TaskLimits;
  using RL = TrainerLimits;
  TrainSequenceArgs a;  // the option structs' defaults are the README run

  using Setter = std::function<void(const std::string& flag, const std::string& value)>;
  const std::map<std::string, Setter> with_value = {
      {"--task", [&](auto& f, auto& v) { a.task.kind = parse_choice(f, v, parse_task_kind); }},
      {"--shift-k", [&](auto& f, auto& v) { a.task.shift = parse_int_flag(f, v, 1, kBig); }},
      {"--vocab", [&](auto& f, auto& v) { a.task.vocab_size = parse_int_flag(f, v, 2, TL::vocab_size); }},
      {"--length", [&](auto& f, auto& v) { a.task.seq_len = parse_int_flag(f, v, 1, std::min(TL::seq_len, ML::max_len)); }},
      {"--d-model", [&](auto& f, auto& v) { a.model.d_model = parse_int_flag(f, v, 1, ML::d_model); }},
      {"--heads", [&](auto& f, auto& v) { a.model.n_head = parse_int_flag(f, v, 1, ML::n_head); }},
      {"--d-ff", [&](auto& f, auto& v) { a.model.d_ff = parse_int_flag(f, v, 1, ML::d_ff); }},
      {"--layers", [&](auto& f, auto& v) { a.model.n_layers = parse_int_flag(f, v, 1, ML::n_layers); }},
      {"--positional", [&](auto& f, auto& v) { a.model.positional = parse_choice(f, v, parse_positional_kind); }},
      {"--dropout", [&](auto& f, auto& v) { a.model.dropout = parse_real_flag(f, v, 0.0, 1.0, true); }},
      {"--optimizer", [&](auto& f, auto& v) { a.trainer.optimizer = parse_choice(f, v, parse_optimizer_kind); }},
      {"--lr", [&](auto& f, auto& v) { a.trainer.lr = parse_real_flag(f, v, 0.0, RL::lr); }},
      {"--min-lr", [&](auto& f, auto& v) { a.trainer.min_lr = parse_real_flag(f, v, 0.0, RL::lr); }},
      {"--weight-decay", [&](auto& f, auto& v) { a.trainer.weight_decay = parse_real_flag(f, v, 0.0, RL::lr); }},
      {"--momentum", [&](auto& f, auto& v) { a.trainer.momentum = parse_real_flag(f, v, 0.0, 1.0, true); }},
      {"--warmup", [&](auto& f, auto& v) { a.trainer.warmup_steps = parse_int_flag(f, v, 0, kBig); }},
      {"--schedule", [&](auto& f, auto& v) { a.trainer.schedule = parse_choice(f, v, parse_lr_decay); }},
      {"--clip", [&](auto& f, auto& v) { a.trainer.clip_norm = parse_real_flag(f, v, 0.0, RL::clip_norm); }},
      {"--steps", [&](auto& f, auto& v) { a.trainer.steps = parse_int_flag(f, v, 1, kBig); }},
      {"--batch", [&](auto& f, auto& v) { a.task.batch_size = parse_int_flag(f, v, 1, TL::batch_size); }},
      {"--eval-every", [&](auto& f, auto& v) { a.trainer.eval_every = parse_int_flag(f, v, 1, kBig); }},
      {"--eval-sequences", [&](auto& f, auto& v) { a.trainer.eval_sequences = parse_int_flag(f, v, 1, RL::eval_sequences); }},
      {"--target-acc", [&](auto& f, auto& v) { a.trainer.target_seq_acc = parse_real_flag(f, v, 0.0, 1.0); }},
      {"--seed", [&](auto& f, auto& v) { a.seed = parse_u64_flag(f, v); }},
      {"--threads", [&](auto& f, auto& v) { a.trainer.threads = static_cast<int>(parse_int_flag(f, v, 1, RL::threads)); }},
      {"--save", [&](auto&, auto& v) { a.save_path = v; }},
      {"--resume", [&](auto&, auto& v) { a.resume_path = v; }},
      {"--log", [&](auto&, auto& v) { a.log_path = v; }},
      {"--plot", [&](auto&, auto& v) { a.plot_path = v; }},
  };
  const std::map<std::string, std::function<void()>> switches = {
      {"--pre-norm", [&] { a.model.norm_first = true; }},
      {"--post-norm", [&] { a.model.norm_first = false; }},
      {"--quiet", [&] { a.quiet = true; }},
      {"--overwrite", [&] { a.overwrite = true; }},
  };

  // Asking for help is never an error, whatever else the line holds.
  for (const std::string& arg : argv) {
    if (arg == "--help" || arg == "-h") {
      a.help = true;
      return a;
    }
  }
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string flag = argv[i];
    std::string value;
    bool inline_value = false;
    if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    if (a.given.count(flag)) throw UsageError(flag + ": given more than once");
    a.given.insert(flag);
    if (const auto s = switches.find(flag); s != switches.end()) {
      if (inline_value) throw UsageError(flag + ": takes no value, got '" + value + "'");
      s->second();
      continue;
    }
    const auto w = with_value.find(flag);
    if (w == with_value.end()) {
      throw UsageError(flag.rfind('-', 0) == 0 ? "unknown flag " + flag + " (see --help)"
                                               : "unexpected argument '" + flag + "' (flags start with --; see --help)");
    }
    if (!inline_value) {
      if (i + 1 >= argv.size()) throw UsageError(flag + ": missing value");
      value = argv[++i];
    }
    if (value.empty()) throw UsageError(flag + ": empty value");
    w->second(flag, value);
  }

  if (a.given.count("--pre-norm") && a.given.count("--post-norm")) {
    throw UsageError("--pre-norm and --post-norm contradict each other");
  }
  if (!a.resume_path.empty()) {
    // The checkpoint holds everything that shapes the trajectory; a flag that changed it would
    // make the resumed run a different one.
    static constexpr const char* kFromCheckpoint[] = {
        "--task",   "--shift-k",      "--vocab",     "--length",   "--d-model",  "--heads",    "--d-ff",
        "--layers", "--pre-norm",     "--post-norm", "--positional", "--dropout", "--optimizer", "--lr",
        "--min-lr", "--weight-decay", "--momentum",  "--warmup",   "--schedule", "--clip",     "--steps",
        "--batch",  "--seed"};
    for (const char* f : kFromCheckpoint) {
      if (a.given.count(f)) {
        throw UsageError(std::string(f) + " cannot be combined with --resume: the checkpoint holds the run's model, "
                                          "task and optimizer settings");
      }
    }
    return a;
  }
  if (a.task.kind != TaskKind::shift && a.given.count("--shift-k")) throw UsageError("--shift-k needs --task shift");
  if (a.task.kind == TaskKind::shift && a.task.shift >= a.task.seq_len) {
    throw UsageError("--shift-k: " + std::to_string(a.task.shift) + " must be below --length " +
                     std::to_string(a.task.seq_len));
  }
  if (a.model.d_model % a.model.n_head != 0) {
    throw UsageError("--heads: " + std::to_string(a.model.n_head) + " does not divide --d-model " +
                     std::to_string(a.model.d_model));
  }
  if (a.trainer.min_lr > a.trainer.lr) {
    throw UsageError("--min-lr: " + std::to_string(a.trainer.min_lr) + " is above --lr " + std::to_string(a.trainer.lr));
  }
  if (!(a.trainer.lr > 0)) throw UsageError("--lr: must be positive");
  if (a.trainer.schedule != LrDecay::constant && a.trainer.warmup_steps >= a.trainer.steps) {
    throw UsageError("--warmup: " + std::to_string(a.trainer.warmup_steps) + " must be below --steps " +
                     std::to_string(a.trainer.steps) + " for a " + lr_decay_name(a.trainer.schedule) + " schedule");
  }
  if (!(a.trainer.target_seq_acc > 0)) throw UsageError("--target-acc: must be above 0");
  a.task.seed = a.seed;
  a.model.vocab = a.task.vocab_size;
  a.model.max_len = a.task.seq_len;
  // Whatever the checks above missed, the library's own validation still names.
  try {
    SequenceTask check_task(a.task);
    validate(a.model);
    validate(a.trainer);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return a;
}

}  // namespace ag
