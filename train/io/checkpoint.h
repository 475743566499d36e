// Checkpoints: everything needed to continue a training run, in one safetensors file.
//
//   tensors
//     <param name>                      each parameter under its dotted name, in its dtype
//     optimizer/<param name>/step       I64 shape (): updates applied to that parameter
//     optimizer/<param name>/<slot>     momentum_buffer, exp_avg, exp_avg_sq (parameter's shape)
//   __metadata__ (string -> string)
//     format                            "attograd-checkpoint"
//     format_version                    "3" (versions 1 and 2 still load; see below)
//     crc32c                            every tensor's checksum and every other metadata value's
//                                       (written by safetensors.h). Version 3 files must carry
//                                       both; a version 2 file may lack the metadata's (written
//                                       before it was checksummed: its tensors alone are
//                                       verified), a version 1 file both
//     optimizer                         "SGD" / "Adam" / "AdamW" (absent without optimizer state)
//     optimizer_state_params            how many parameters have optimizer state
//     rng_seed, rng_step, rng_call      the GeneratorState, decimal
//     data_position                     the next training batch index, decimal
//     ...                               the caller's extras, e.g. "model" and "task" as JSON text
//
// The '/' in optimizer names cannot occur in a dotted module path, so the two never collide,
// and a PyTorch user can load the parameters with safetensors.torch.load_file and drop the
// optimizer/ keys.
//
// Loading restores in place (the parameters' storage is kept, so views and optimizers holding
// them stay valid) and checks everything before changing anything: format and version, every
// tensor's checksum, every parameter present with its dtype and shape and with finite values
// within kMaxParameterMagnitude, no unknown tensors, an optimizer state of the right kind and
// shapes for as many parameters as the file says, with sane values (Optimizer::load_state).
// Each problem is a std::runtime_error that starts with "checkpoint '<path>': " and names the
// tensor or key involved (and, for a bad value, its index).
//
// Version 1 (before checksums) is read without the two checks that need version 2's entries:
// the checksums and the optimizer_state_params count.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include "attograd/autograd/variable.h"
#include "attograd/core/rng.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/optim.h"

namespace ag {

inline constexpr int kCheckpointFormatVersion = 3;
// Parameters in a checkpoint must be finite and at most this large in magnitude: far beyond
// anything training produces (a diverging run is stopped long before), so a larger value means
// a corrupt or hand-made file. Optimizer state has its own bounds (optim.h).
inline constexpr double kMaxParameterMagnitude = kMaxStateMagnitude;

// What a checkpoint carries besides the tensors.
struct CheckpointInfo {
  int format_version = kCheckpointFormatVersion;
  std::string optimizer;                         // empty when the file has no optimizer state
  GeneratorState rng_state;
  uint64_t data_position = 0;
  std::map<std::string, std::string> metadata;  // the whole __metadata__, extras included
};

// Writes parameters, optimizer state, RNG state, data position and `extra_metadata` (whose
// keys must not be one of the reserved keys above: std::invalid_argument) atomically. Every
// optimizer parameter must be among `params` (std::invalid_argument otherwise).
void save_checkpoint(const std::string& path, const NamedVariables& params, const Optimizer& optimizer,
                     const std::map<std::string, std::string>& extra_metadata, const GeneratorState& rng_state,
                     uint64_t data_position);
// The same without optimizer state (a model to evaluate or export).
void save_checkpoint(const std::string& path, const NamedVariables& params,
                     const std::map<std::string, std::string>& extra_metadata, const GeneratorState& rng_state,
                     uint64_t data_position);

// A checkpoint read from disk once: the file is read, every checksum verified and the header
// parsed when it is opened; what a program then asks of it (the metadata to rebuild a model
// from, the tensors to load into it) comes from memory.
//
//   const Checkpoint ck = Checkpoint::open(path);        // the one read
//   GPTOptions options = gpt_options_from_json(ck.entry("model"));
//   GPT model(options);
//   ck.load(model.named_parameters(), optimizer);       // checks everything, then copies in place
class Checkpoint {
 public:
  // std::runtime_error naming the file when it cannot be read, is not a valid safetensors file,
  // or its metadata is not an attograd checkpoint's.
  static Checkpoint open(const std::string& path);

  const std::string& path() const { return path_; }
  const CheckpointInfo& info() const { return info_; }
  // The metadata entry `key`; std::runtime_error naming the file and the key when it is absent.
  const std::string& entry(const std::string& key) const;
  bool has_entry(const std::string& key) const { return info_.metadata.count(key) != 0; }
  // entry(key) read by `parse` (a function of the text, such as gpt_options_from_json); what it
  // throws (std::invalid_argument, or std::runtime_error for malformed JSON) becomes a
  // std::runtime_error naming the file and the entry.
  template <typename Parse>
  auto parse_entry(const std::string& key, Parse parse) const {
    const std::string& text = entry(key);
    try {
      return parse(text);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("checkpoint '" + path() + "': metadata '" + key + "' is invalid: " + e.what());
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("checkpoint '" + path() + "': metadata '" + key + "' is invalid: " + e.what());
    }
  }

  // Restores parameters and, with an optimizer, its state (the file must hold state for this
  // kind of optimizer). Everything is checked before anything changes.
  void load(const NamedVariables& params, Optimizer& optimizer) const;
  // Restores parameters only; optimizer state in the file is ignored.
  void load(const NamedVariables& params) const;

 private:
  Checkpoint(std::string path, SafetensorsFile file, CheckpointInfo info)
      : path_(std::move(path)), file_(std::move(file)), info_(std::move(info)) {}
  void load(const NamedVariables& params, Optimizer* optimizer) const;

  std::string path_;
  SafetensorsFile file_;
  CheckpointInfo info_;
};

// Checkpoint::open(path) and its load, for a caller that needs nothing else from the file.
CheckpointInfo load_checkpoint(const std::string& path, const NamedVariables& params, Optimizer& optimizer);
CheckpointInfo load_checkpoint(const std::string& path, const NamedVariables& params);
// Checkpoint::open(path).info(): the whole file is read and verified even for its metadata.
CheckpointInfo read_checkpoint_info(const std::string& path);

}  // namespace ag
