#include "attograd/train/io/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <set>
#include <stdexcept>

#include "attograd/train/io/safetensors.h"

namespace ag {

namespace {

constexpr const char* kFormat = "attograd-checkpoint";
constexpr const char* kOptimizerPrefix = "optimizer/";
constexpr const char* kReservedKeys[] = {"format", "format_version", "optimizer", "optimizer_state_params",
                                         "rng_seed", "rng_step", "rng_call", "data_position"};
constexpr const char* kSlots[] = {"momentum_buffer", "exp_avg", "exp_avg_sq"};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("checkpoint '" + path + "': " + what);
}

Tensor& slot_of(ParamState& s, const std::string& slot) {
  if (slot == "momentum_buffer") return s.momentum_buffer;
  if (slot == "exp_avg") return s.exp_avg;
  return s.exp_avg_sq;
}

SafetensorsFile checkpoint_file(const NamedVariables& params, const Optimizer* optimizer,
                                const std::map<std::string, std::string>& extra_metadata,
                                const GeneratorState& rng_state, uint64_t data_position) {
  SafetensorsFile file;
  for (const auto& [key, value] : extra_metadata) {
    if (std::find(std::begin(kReservedKeys), std::end(kReservedKeys), key) != std::end(kReservedKeys)) {
      throw std::invalid_argument("save_checkpoint: metadata key '" + key + "' is reserved for the checkpoint itself");
    }
    file.metadata[key] = value;
  }
  file.metadata["format"] = kFormat;
  file.metadata["format_version"] = std::to_string(kCheckpointFormatVersion);
  file.metadata["rng_seed"] = std::to_string(rng_state.seed);
  file.metadata["rng_step"] = std::to_string(rng_state.step);
  file.metadata["rng_call"] = std::to_string(rng_state.call);
  file.metadata["data_position"] = std::to_string(data_position);

  for (const auto& [name, p] : params) {
    if (!p.defined()) throw std::invalid_argument("save_checkpoint: parameter '" + name + "' is undefined");
    if (name.find('/') != std::string::npos) {
      throw std::invalid_argument("save_checkpoint: parameter name '" + name + "' contains '/' (reserved for optimizer state)");
    }
    file.add(name, p.value());  // rejects empty and repeated names
  }
  if (optimizer == nullptr) return file;

  file.metadata["optimizer"] = optimizer->name();
  file.metadata["optimizer_state_params"] = std::to_string(optimizer->state().size());
  for (const auto& [name, p] : optimizer->params()) {
    const auto it = std::find_if(params.begin(), params.end(), [&](const auto& np) { return np.first == name; });
    if (it == params.end() || it->second.id() != p.id()) {
      throw std::invalid_argument("save_checkpoint: optimizer parameter '" + name + "' is not among the parameters saved");
    }
  }
  for (auto& [name, state] : optimizer->state()) {
    const std::string prefix = kOptimizerPrefix + name + "/";
    file.add(prefix + "step", Indices(Shape{}, {state.step}));
    for (const char* slot : kSlots) {
      const Tensor& t = slot_of(state, slot);
      if (t.defined()) file.add(prefix + slot, t);
    }
  }
  return file;
}

uint64_t metadata_u64(const std::string& path, const std::map<std::string, std::string>& meta, const char* key) {
  const auto it = meta.find(key);
  if (it == meta.end()) fail(path, std::string("__metadata__ has no '") + key + "'");
  const std::string& s = it->second;
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    fail(path, std::string("__metadata__ '") + key + "' is '" + s + "', not an unsigned integer");
  }
  return v;
}

CheckpointInfo info_of(const std::string& path, const SafetensorsFile& file) {
  const auto& meta = file.metadata;
  const auto format = meta.find("format");
  const auto version = meta.find("format_version");
  if (format == meta.end() || version == meta.end()) {
    fail(path, "__metadata__ lacks format and format_version: not an attograd checkpoint");
  }
  if (format->second != kFormat) fail(path, "format is '" + format->second + "', expected '" + kFormat + "'");
  CheckpointInfo info;
  info.format_version = 0;
  for (int v = 1; v <= kCheckpointFormatVersion; ++v) {
    if (version->second == std::to_string(v)) info.format_version = v;
  }
  if (info.format_version == 0) {
    fail(path, "format_version '" + version->second + "' is not supported (this build reads versions 1 to " +
                   std::to_string(kCheckpointFormatVersion) + ")");
  }
  // Each version is held to what its writers always wrote, so that a file cannot pass for an
  // older one by losing its checksums: an edited value whose checksum was deleted is refused.
  if (info.format_version >= 2 && !file.checksummed) {
    fail(path, "__metadata__ has no 'crc32c' checksums, which every version " + version->second + " checkpoint carries");
  }
  if (info.format_version >= 3 && !file.metadata_checksummed) {
    fail(path, "__metadata__ 'crc32c' has no checksums of the metadata values, which every version " + version->second +
                   " checkpoint carries (were they removed after a value was edited?)");
  }
  info.rng_state.seed = metadata_u64(path, meta, "rng_seed");
  info.rng_state.step = metadata_u64(path, meta, "rng_step");
  info.rng_state.call = metadata_u64(path, meta, "rng_call");
  info.data_position = metadata_u64(path, meta, "data_position");
  const auto opt = meta.find("optimizer");
  if (opt != meta.end()) info.optimizer = opt->second;
  info.metadata = meta;
  return info;
}

// Collects the optimizer state of the file, validating names and entry types. Entries for
// parameters the optimizer does not have are an error.
OptimizerState optimizer_state_of(const std::string& path, const SafetensorsFile& file, const Optimizer& optimizer) {
  OptimizerState state;
  std::set<std::string> with_step;
  const auto state_for = [&](const std::string& pname) -> ParamState& {
    for (auto& [n, s] : state) {
      if (n == pname) return s;
    }
    return state.emplace_back(pname, ParamState{}).second;
  };
  for (const SafetensorsEntry& e : file.entries) {
    if (e.name.rfind(kOptimizerPrefix, 0) != 0) continue;
    const std::string rest = e.name.substr(std::string(kOptimizerPrefix).size());
    const size_t slash = rest.rfind('/');
    const std::string pname = slash == std::string::npos ? rest : rest.substr(0, slash);
    const std::string slot = slash == std::string::npos ? "" : rest.substr(slash + 1);
    const auto known = std::find_if(optimizer.params().begin(), optimizer.params().end(),
                                    [&](const auto& np) { return np.first == pname; });
    if (known == optimizer.params().end()) {
      fail(path, "unexpected tensor '" + e.name + "': optimizer state for a parameter the optimizer does not have");
    }
    if (slot == "step") {
      if (e.dtype != SafetensorsDType::I64 || e.indices.numel() != 1 || e.indices.shape.rank() != 0) {
        fail(path, "tensor '" + e.name + "' must be an I64 scalar, got " + safetensors_dtype_name(e.dtype) + " " +
                       e.shape().str());
      }
      state_for(pname).step = e.indices[0];
      with_step.insert(pname);
      continue;
    }
    if (std::find(std::begin(kSlots), std::end(kSlots), slot) == std::end(kSlots)) {
      fail(path, "unexpected tensor '" + e.name + "': unknown optimizer slot '" + slot + "'");
    }
    if (e.dtype == SafetensorsDType::I64) fail(path, "tensor '" + e.name + "' has dtype I64, expected F32 or F64");
    slot_of(state_for(pname), slot) = e.tensor;
  }
  for (const auto& [pname, s] : state) {
    if (!with_step.count(pname)) fail(path, "missing tensor 'optimizer/" + pname + "/step'");
  }
  return state;
}

// A checkpoint that says it carries optimizer state carries all of it: without the count, a
// file stripped of its optimizer/ tensors would resume with a fresh state, silently.
void check_state_count(const std::string& path, const SafetensorsFile& file, const CheckpointInfo& info,
                       const OptimizerState& state) {
  if (info.format_version < 2) return;
  const uint64_t expected = metadata_u64(path, file.metadata, "optimizer_state_params");
  if (expected != state.size()) {
    fail(path, "__metadata__ says " + std::to_string(expected) + " parameters have optimizer state, but the file holds " +
                   "state for " + std::to_string(state.size()) + " (optimizer/ tensors are missing or extra)");
  }
}

void check_parameter_values(const std::string& path, const std::string& name, const Tensor& t) {
  const int64_t bad = first_value_outside(t, -kMaxParameterMagnitude, kMaxParameterMagnitude);
  if (bad < 0) return;
  std::ostringstream value;
  value << t.reshape({-1}).at({bad});
  fail(path, "tensor '" + name + "' holds " + value.str() + " at index " + index_str(t.shape(), bad) +
                 (std::isfinite(t.reshape({-1}).at({bad}))
                      ? ", beyond the largest magnitude a checkpoint may hold (" + std::to_string(kMaxParameterMagnitude) + ")"
                      : ": a checkpoint's parameters must be finite") +
                 "; the file is corrupt or not from a healthy run");
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  CheckpointInfo info = info_of(path, file);
  return Checkpoint(path, std::move(file), std::move(info));
}

const std::string& Checkpoint::entry(const std::string& key) const {
  const auto it = info_.metadata.find(key);
  if (it == info_.metadata.end()) {
    fail(path_, "__metadata__ has no '" + key + "' (it was not written by attograd's trainer)");
  }
  return it->second;
}

void Checkpoint::load(const NamedVariables& params, Optimizer& optimizer) const { load(params, &optimizer); }

void Checkpoint::load(const NamedVariables& params) const { load(params, nullptr); }

void Checkpoint::load(const NamedVariables& params, Optimizer* optimizer) const {
  const std::string& path = path_;
  const SafetensorsFile& file = file_;
  const CheckpointInfo& info = info_;

  // 1. Every parameter present, with its dtype and shape.
  std::vector<const Tensor*> sources;
  std::set<std::string> param_names;
  for (const auto& [name, p] : params) {
    param_names.insert(name);
    const SafetensorsEntry* e = file.find(name);
    if (e == nullptr) fail(path, "missing tensor '" + name + "' (a parameter of the model)");
    const char* want = p.dtype() == DType::f32 ? "F32" : "F64";
    if (e->dtype == SafetensorsDType::I64 || e->tensor.dtype() != p.dtype()) {
      fail(path, "tensor '" + name + "' has dtype " + safetensors_dtype_name(e->dtype) + " but the parameter is " + want);
    }
    if (e->tensor.shape() != p.shape()) {
      fail(path, "tensor '" + name + "' has shape " + e->tensor.shape().str() + " but the parameter has shape " +
                     p.shape().str());
    }
    check_parameter_values(path, name, e->tensor);
    sources.push_back(&e->tensor);
  }
  // 2. No tensor the model does not know.
  for (const SafetensorsEntry& e : file.entries) {
    if (param_names.count(e.name) || e.name.rfind(kOptimizerPrefix, 0) == 0) continue;
    fail(path, "unexpected tensor '" + e.name + "' (not a parameter of the model)");
  }
  // 3. The optimizer state; load_state validates before it changes anything.
  if (optimizer != nullptr) {
    if (info.optimizer.empty()) fail(path, std::string("the file has no optimizer state to load into ") + optimizer->name());
    if (info.optimizer != optimizer->name()) {
      fail(path, "optimizer state was saved by " + info.optimizer + ", cannot load it into " + optimizer->name());
    }
    const OptimizerState state = optimizer_state_of(path, file, *optimizer);
    check_state_count(path, file, info, state);
    try {
      optimizer->load_state(state);
    } catch (const std::invalid_argument& e) {
      fail(path, std::string("optimizer state is invalid: ") + e.what());
    }
  }
  // 4. Nothing can fail any more: copy in place.
  for (size_t i = 0; i < params.size(); ++i) {
    Variable handle = params[i].second;
    handle.mutable_value().copy_(*sources[i]);
  }
}

void save_checkpoint(const std::string& path, const NamedVariables& params, const Optimizer& optimizer,
                     const std::map<std::string, std::string>& extra_metadata, const GeneratorState& rng_state,
                     uint64_t data_position) {
  save_safetensors(path, checkpoint_file(params, &optimizer, extra_metadata, rng_state, data_position));
}

void save_checkpoint(const std::string& path, const NamedVariables& params,
                     const std::map<std::string, std::string>& extra_metadata, const GeneratorState& rng_state,
                     uint64_t data_position) {
  save_safetensors(path, checkpoint_file(params, nullptr, extra_metadata, rng_state, data_position));
}

CheckpointInfo load_checkpoint(const std::string& path, const NamedVariables& params, Optimizer& optimizer) {
  const Checkpoint ck = Checkpoint::open(path);
  ck.load(params, optimizer);
  return ck.info();
}

CheckpointInfo load_checkpoint(const std::string& path, const NamedVariables& params) {
  const Checkpoint ck = Checkpoint::open(path);
  ck.load(params);
  return ck.info();
}

CheckpointInfo read_checkpoint_info(const std::string& path) { return Checkpoint::open(path).info(); }

}  // namespace ag
