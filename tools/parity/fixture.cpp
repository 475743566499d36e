#include "fixture.h"

#include <cmath>
#include <sstream>
#include <utility>

namespace ag::parity {

namespace {

// The tensor names a fixture may hold (docs/parity.md); anything else is a typo or a newer format.
constexpr const char* kTensorPrefixes[] = {"param.", "input.", "mask.", "expect.", "reference."};
constexpr const char* kTensorNames[] = {"grad.output"};

bool known_tensor_name(const std::string& name) {
  for (const char* p : kTensorPrefixes) {
    if (name.rfind(p, 0) == 0 && name.size() > std::string(p).size()) return true;
  }
  for (const char* n : kTensorNames) {
    if (name == n) return true;
  }
  return false;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

}  // namespace

// ---- Config ----

Config::Config(Json object, std::string where, std::string label)
    : json_(std::move(object)), where_(std::move(where)), label_(std::move(label)) {
  if (!json_.is_object()) {
    throw FixtureError("fixture '" + label_ + "': " + where_ + " must be a JSON object, got " + json_.dump());
  }
}

void Config::fail(const std::string& key, const std::string& what) const {
  throw FixtureError("fixture '" + label_ + "': " + where_ + "." + key + " " + what);
}

const Json* Config::lookup(const std::string& key) const {
  read_.insert(key);
  const auto it = json_.find(key);
  return it == json_.end() ? nullptr : &*it;
}

int64_t Config::integer(const std::string& key) const {
  const Json* v = lookup(key);
  if (v == nullptr) fail(key, "is required (in " + json_.dump() + ")");
  const std::optional<int64_t> i = json_int64(*v);
  if (!i) fail(key, "must be an integer, got " + v->dump());
  return *i;
}

int64_t Config::integer(const std::string& key, int64_t fallback) const {
  if (!json_.contains(key)) {
    read_.insert(key);
    return fallback;
  }
  return integer(key);
}

std::optional<int64_t> Config::optional_integer(const std::string& key) const {
  const Json* v = lookup(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return integer(key);
}

std::vector<int64_t> Config::integers(const std::string& key) const {
  const Json* v = lookup(key);
  if (v == nullptr) fail(key, "is required (in " + json_.dump() + ")");
  if (!v->is_array()) fail(key, "must be a list of integers, got " + v->dump());
  std::vector<int64_t> out;
  for (const Json& item : *v) {
    const std::optional<int64_t> i = json_int64(item);
    if (!i) fail(key, "must be a list of integers, got " + v->dump());
    out.push_back(*i);
  }
  return out;
}

double Config::number(const std::string& key, double fallback) const {
  const Json* v = lookup(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) fail(key, "must be a number, got " + v->dump());
  return v->get<double>();
}

bool Config::boolean(const std::string& key, bool fallback) const {
  const Json* v = lookup(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(key, "must be true or false, got " + v->dump());
  return v->get<bool>();
}

std::string Config::string(const std::string& key, const std::string& fallback) const {
  const Json* v = lookup(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) fail(key, "must be a string, got " + v->dump());
  return v->get<std::string>();
}

const Config& Config::object(const std::string& key) const {
  const Json* v = lookup(key);
  if (v == nullptr) fail(key, "is required (in " + json_.dump() + ")");
  if (!v->is_object()) fail(key, "must be an object, got " + v->dump());
  return children_.emplace_back(*v, where_ + "." + key, label_);
}

std::string Config::dump_all() const {
  for (const auto& [key, value] : json_.items()) read_.insert(key);
  return json_.dump();
}

void Config::check_all_read() const {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : json_.items()) {
    if (!read_.count(key)) unknown.push_back("'" + key + "'");
  }
  if (!unknown.empty()) {
    throw FixtureError("fixture '" + label_ + "': " + where_ + " has unknown option(s) " + join(unknown));
  }
  for (const Config& child : children_) child.check_all_read();
}

// ---- Fixture ----

Fixture::Fixture(SafetensorsFile file, std::string label) : file_(std::move(file)), label_(std::move(label)) {
  const auto required = [&](const char* key) -> const std::string& {
    const auto it = file_.metadata.find(key);
    if (it == file_.metadata.end()) fail(std::string("__metadata__ lacks '") + key + "'");
    return it->second;
  };
  const std::string& format = required("format");
  if (format != kFixtureFormat) {
    fail("format '" + format + "' is not '" + kFixtureFormat + "' (regenerate the fixture or update the tool)");
  }
  module_ = required("module");
  const std::string& dtype = required("dtype");
  if (dtype == "float32") dtype_ = DType::f32;
  else if (dtype == "float64") dtype_ = DType::f64;
  else fail("dtype '" + dtype + "' is neither float32 nor float64");
  const std::string& mode = required("mode");
  if (mode != "train" && mode != "eval") fail("mode '" + mode + "' is neither train nor eval");
  training_ = mode == "train";
  const std::string& config = required("config");
  try {
    config_ = std::make_unique<Config>(parse_json(config), "config", label_);
  } catch (const JsonError& e) {
    fail("config is not valid JSON (" + std::string(e.what()) + "): " + config);
  }
  (void)causal();  // validates the value early
  for (const SafetensorsEntry& e : file_.entries) {
    if (!known_tensor_name(e.name)) {
      fail("tensor '" + e.name + "' is not a fixture name (param.*, input.*, mask.*, grad.output, expect.*, reference.*)");
    }
    has_references_ |= e.name.rfind("reference.", 0) == 0;
  }
  if (has_references_ && dtype_ != DType::f32) {
    fail("reference.* tensors are the float64 answers of a float32 fixture, but this fixture is " +
         std::string(dtype_text()));
  }
}

Fixture Fixture::load(const std::string& path) {
  try {
    return Fixture(load_safetensors(path), path);
  } catch (const FixtureError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw FixtureError("fixture '" + path + "': " + e.what());
  }
}

void Fixture::fail(const std::string& what) const { throw FixtureError("fixture '" + label_ + "': " + what); }

std::string Fixture::metadata(const std::string& key, const std::string& fallback) const {
  const auto it = file_.metadata.find(key);
  return it == file_.metadata.end() ? fallback : it->second;
}

bool Fixture::causal() const {
  const std::string value = metadata("causal", "false");
  if (value != "true" && value != "false") fail("metadata causal is '" + value + "', not true or false");
  return value == "true";
}

const SafetensorsEntry& Fixture::entry(const std::string& name) const {
  const SafetensorsEntry* e = file_.find(name);
  if (e == nullptr) fail("the " + module_ + " fixture needs tensor '" + name + "'");
  used_.insert(name);
  return *e;
}

Tensor Fixture::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  if (e.dtype == SafetensorsDType::I64) fail("tensor '" + name + "' is I64 but must be " + dtype_text());
  if (e.tensor.dtype() != dtype_) {
    fail("tensor '" + name + "' is " + safetensors_dtype_name(e.dtype) + " but the fixture's dtype is " + dtype_text());
  }
  return e.tensor;
}

Indices Fixture::indices(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  if (e.dtype != SafetensorsDType::I64) {
    fail("tensor '" + name + "' is " + safetensors_dtype_name(e.dtype) + " but must be I64 (integers)");
  }
  return e.indices;
}

Tensor Fixture::reference(const std::string& name, const Shape& shape) const {
  const std::string key = "reference." + name;
  if (!has(key)) {
    fail("the fixture carries float64 references but none for 'expect." + name + "' (add '" + key + "')");
  }
  const SafetensorsEntry& e = entry(key);
  if (e.dtype != SafetensorsDType::F64) {
    fail("tensor '" + key + "' is " + safetensors_dtype_name(e.dtype) + " but a reference must be F64");
  }
  if (e.tensor.shape() != shape) {
    fail("tensor '" + key + "' has shape " + e.tensor.shape().str() + " but expect." + name + " has " + shape.str());
  }
  for (double v : e.tensor.to_vector()) {
    if (!std::isfinite(v)) fail("tensor '" + key + "' holds a value that is not finite");
  }
  return e.tensor;
}

std::vector<std::string> Fixture::names_after(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const SafetensorsEntry& e : file_.entries) {
    if (e.name.rfind(prefix, 0) == 0) out.push_back(e.name.substr(prefix.size()));
  }
  return out;
}

StateDict Fixture::params() const {
  StateDict state;
  for (const std::string& name : names_after("param.")) state.emplace_back(name, tensor("param." + name));
  return state;
}

void Fixture::require_comparable_dropout(double p, const std::string& option) const {
  if (training_ && p > 0.0) {
    std::ostringstream os;
    os << "mode is train but " << option << " = " << p
       << ": dropout masks differ between frameworks, so train-mode dropout cannot be compared "
          "(use mode eval or dropout 0)";
    fail(os.str());
  }
}

void Fixture::check_all_used() const {
  std::vector<std::string> unused;
  for (const SafetensorsEntry& e : file_.entries) {
    if (!used_.count(e.name)) unused.push_back("'" + e.name + "'");
  }
  if (!unused.empty()) fail("the " + module_ + " runner does not read tensor(s) " + join(unused));
  config_->check_all_read();
}

}  // namespace ag::parity
