// A PyTorch parity fixture: one safetensors file holding a module's configuration, its
// parameters, its inputs and masks, an upstream gradient and the results PyTorch computed
// (the format is specified in docs/parity.md).
//
//   __metadata__  format "attograd-parity/1", module, config (JSON, our option names),
//                 dtype ("float32" / "float64"), mode ("train" / "eval"), optional extras
//   tensors       param.<dotted name>, input.<name>, mask.keep, mask.key_padding_lengths,
//                 grad.output, expect.output, expect.<extra>, expect.grad.param.<name>,
//                 expect.grad.input.<name>; in a float32 fixture optionally reference.<same
//                 names after expect.>, the float64 answers (F64)
//
// Fixture reads strictly: every accessor checks presence, kind (float or integer) and dtype, and
// remembers what it handed out, so that check_all_used() can reject a tensor or a config key no
// part of the runner understood (a typo in a hand-written fixture must not pass silently).
// Every problem is a FixtureError whose message starts with "fixture '<label>': ".
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "attograd/autograd/variable.h"
#include "attograd/core/indices.h"
#include "attograd/core/tensor.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/safetensors.h"

namespace ag::parity {

inline constexpr const char* kFixtureFormat = "attograd-parity/1";

// A fixture that cannot be run as written (the tool exits with status 2). A runtime_error: the
// problem lies in a file, not in the caller's use of the API.
class FixtureError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One JSON object of options ("config" or a nested object such as "config.block") with typed,
// key-tracking access. Missing optional keys take the fallback the caller passes (attograd's
// default for that option).
class Config {
 public:
  Config(Json object, std::string where, std::string label);

  int64_t integer(const std::string& key) const;  // required
  int64_t integer(const std::string& key, int64_t fallback) const;
  // null or absent -> nullopt
  std::optional<int64_t> optional_integer(const std::string& key) const;
  std::vector<int64_t> integers(const std::string& key) const;  // required list
  double number(const std::string& key, double fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  // A nested object (required); its keys are checked by check_all_read() too.
  const Config& object(const std::string& key) const;
  // The object's JSON text, every key counted as read (for parsers that check keys themselves).
  std::string dump_all() const;

  // FixtureError naming every key no accessor asked for.
  void check_all_read() const;

 private:
  const Json* lookup(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

  Json json_;
  std::string where_;
  std::string label_;
  mutable std::set<std::string> read_;
  mutable std::list<Config> children_;  // list: holds an incomplete type, keeps references valid
};

class Fixture {
 public:
  // Validates the metadata (format, module, config, dtype, mode).
  Fixture(SafetensorsFile file, std::string label);
  // Reads `path`; an unreadable or corrupt file is a FixtureError too.
  static Fixture load(const std::string& path);

  const std::string& label() const { return label_; }
  const std::string& module() const { return module_; }
  DType dtype() const { return dtype_; }
  const char* dtype_text() const { return dtype_ == DType::f32 ? "float32" : "float64"; }
  bool training() const { return training_; }
  const Config& config() const { return *config_; }
  // A metadata value, or `fallback` when the key is absent.
  std::string metadata(const std::string& key, const std::string& fallback = "") const;
  // metadata "causal": "true" or "false" (absent means false).
  bool causal() const;

  bool has(const std::string& name) const { return file_.contains(name); }
  // A floating tensor of the fixture's dtype.
  Tensor tensor(const std::string& name) const;
  // An I64 tensor.
  Indices indices(const std::string& name) const;
  // Whether this float32 fixture carries float64 answers (reference.<name> beside expect.<name>).
  bool has_references() const { return has_references_; }
  // reference.<name>: F64 of `shape`, every value finite. A fixture with references must give
  // one for every compared result, so a missing one is a FixtureError.
  Tensor reference(const std::string& name, const Shape& shape) const;
  // The names after `prefix` of every tensor that starts with it, in file order.
  std::vector<std::string> names_after(const std::string& prefix) const;
  // Every param.<name> tensor as <name> -> tensor, for Module::load_state_dict.
  StateDict params() const;

  // Throws when a train-mode fixture asks for dropout: masks are drawn differently in every
  // framework, so only eval mode or p = 0 can be compared.
  void require_comparable_dropout(double p, const std::string& option) const;
  // FixtureError naming every tensor and config key that nothing read.
  void check_all_used() const;

  [[noreturn]] void fail(const std::string& what) const;

 private:
  const SafetensorsEntry& entry(const std::string& name) const;

  SafetensorsFile file_;
  std::string label_;
  std::string module_;
  DType dtype_ = DType::f64;
  bool training_ = false;
  bool has_references_ = false;
  std::unique_ptr<Config> config_;
  mutable std::set<std::string> used_;
};

}  // namespace ag::parity
