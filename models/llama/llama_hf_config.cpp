// config.json of a Hugging Face Llama-family directory, read and written (llama_hf.h).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "attograd/models/llama/llama_hf.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

// The architectures read, with the model_type each config.json carries.
struct Architecture {
  const char* name;
  const char* model_type;
};
constexpr Architecture kArchitectures[] = {{"LlamaForCausalLM", "llama"},
                                           {"MistralForCausalLM", "mistral"},
                                           {"Qwen2ForCausalLM", "qwen2"},
                                           {"Qwen3ForCausalLM", "qwen3"}};

std::string known_architectures() {
  std::string s;
  for (const Architecture& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

class ConfigReader {
 public:
  ConfigReader(const std::string& path, const Json& config) : path_(path), config_(config) {}

  std::runtime_error bad(const std::string& what) const {
    return std::runtime_error("Hugging Face config '" + path_ + "': " + what);
  }
  const Json* find(const char* key) const {
    const auto it = config_.find(key);
    return it == config_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const char* key, int64_t low, int64_t high, std::optional<int64_t> fallback = {}) const {
    const Json* v = find(key);
    if (!v) {
      if (fallback) return *fallback;
      throw bad(std::string("has no \"") + key + "\"");
    }
    const std::optional<int64_t> i = json_int64(*v);
    if (!i || *i < low || *i > high) {
      throw bad(std::string("\"") + key + "\" is " + v->dump() + ", not a whole number in [" + std::to_string(low) +
                ", " + std::to_string(high) + "]");
    }
    return *i;
  }
  double number(const char* key, double fallback) const {
    const Json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>())) throw bad(std::string("\"") + key + "\" is " + v->dump() + ", not a number");
    return v->get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    const Json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) throw bad(std::string("\"") + key + "\" is " + v->dump() + ", not true or false");
    return v->get<bool>();
  }

 private:
  const std::string& path_;
  const Json& config_;
};

RopeScaling rope_scaling(const ConfigReader& c) {
  RopeScaling s;
  const Json* r = c.find("rope_scaling");
  if (!r) return s;
  if (!r->is_object()) throw c.bad("\"rope_scaling\" is " + r->dump() + ", not an object or null");
  const auto type = r->contains("rope_type") ? r->at("rope_type") : r->contains("type") ? r->at("type") : Json();
  if (type == "default") return s;
  if (type != "llama3") {
    throw c.bad("rope_scaling of type " + type.dump() + " is not supported (only \"llama3\" and \"default\")");
  }
  s.kind = RopeScaling::Kind::llama3;
  const Json& o = *r;
  const auto num = [&](const char* key, double fallback) {
    const auto it = o.find(key);
    if (it == o.end()) return fallback;
    if (!it->is_number()) throw c.bad(std::string("rope_scaling.") + key + " is " + it->dump() + ", not a number");
    return it->get<double>();
  };
  s.factor = num("factor", s.factor);
  s.low_freq_factor = num("low_freq_factor", s.low_freq_factor);
  s.high_freq_factor = num("high_freq_factor", s.high_freq_factor);
  const double original = num("original_max_position_embeddings", 8192);
  if (original != std::floor(original) || original < 1 || original > 1e9) {
    throw c.bad("rope_scaling.original_max_position_embeddings is " +
                o.at("original_max_position_embeddings").dump() + ", not a positive whole number");
  }
  s.original_max_position_embeddings = static_cast<int64_t>(original);
  return s;
}

}  // namespace

LlamaOptions llama_options_from_hf_config(const std::string& path) {
  return llama_options_from_hf_json(read_file(path), path);
}

LlamaOptions llama_options_from_hf_json(const std::string& text, const std::string& path) {
  Json config;
  try {
    config = parse_json(text);
  } catch (const JsonError& e) {
    throw std::runtime_error("Hugging Face config '" + path + "': not JSON: " + e.what());
  }
  const ConfigReader c(path, config);
  if (!config.is_object()) throw c.bad("not a JSON object");
  const Json* type = c.find("model_type");
  const Json* archs = c.find("architectures");
  const Architecture* arch = nullptr;
  for (const Architecture& a : kArchitectures) {
    const bool by_type = type && *type == a.model_type;
    const bool by_name = archs && archs->is_array() && archs->size() == 1 && (*archs)[0] == a.name;
    if (by_type || by_name) arch = &a;
  }
  if (!arch) {
    throw c.bad("model_type " + (type ? type->dump() : std::string("(none)")) + " and architectures " +
                (archs ? archs->dump() : std::string("(none)")) + " name none of " + known_architectures());
  }
  const std::string model_type = arch->model_type;
  LlamaOptions o;
  o.vocab = c.integer("vocab_size", 1, int64_t{1} << 22);
  o.d_model = c.integer("hidden_size", 1, int64_t{1} << 16);
  o.d_hidden = c.integer("intermediate_size", 1, int64_t{1} << 20);
  o.n_layers = c.integer("num_hidden_layers", 1, 1024);
  o.n_head = c.integer("num_attention_heads", 1, 4096);
  o.n_kv_head = c.integer("num_key_value_heads", 1, o.n_head, o.n_head);
  o.head_dim = c.integer("head_dim", 2, 4096, o.d_model % o.n_head == 0 ? o.d_model / o.n_head : 0);
  o.max_positions = c.integer("max_position_embeddings", 1, int64_t{1} << 22);
  o.rms_norm_eps = c.number("rms_norm_eps", 1e-6);
  o.rope_theta = c.number("rope_theta", 10000.0);
  o.rope_scaling = rope_scaling(c);
  o.tie_word_embeddings = c.boolean("tie_word_embeddings", false);
  // Qwen2's q/k/v biases are part of the architecture (its config has no key for them).
  o.attention_bias = model_type == "qwen2" ? true : c.boolean("attention_bias", false);
  o.qk_norm = model_type == "qwen3";
  if (const Json* act = c.find("hidden_act"); act && *act != "silu") {
    throw c.bad("hidden_act is " + act->dump() + "; this family's MLP is SwiGLU with silu");
  }
  if (c.boolean("mlp_bias", false)) throw c.bad("mlp_bias is true; the MLP here has no biases");
  if (c.integer("pretraining_tp", 1, 1 << 20, 1) != 1) throw c.bad("pretraining_tp must be 1");
  // A sliding window at least as long as the context changes nothing; a shorter one caps the
  // context there, where every query still sees every earlier key.
  const bool window_on = model_type == "mistral" || c.boolean("use_sliding_window", false);
  if (const Json* w = c.find("sliding_window"); w && window_on) {
    const int64_t window = c.integer("sliding_window", 1, int64_t{1} << 22);
    o.max_positions = std::min(o.max_positions, window);
  }
  try {
    validate(o);
  } catch (const std::invalid_argument& e) {
    throw c.bad(e.what());
  }
  return resolved(o);
}

std::string Llama::options_json() const { return llama_hf_config_json(options_); }

const char* llama_hf_architecture(const LlamaOptions& o) {
  if (o.qk_norm) return "Qwen3ForCausalLM";
  if (o.attention_bias) return "Qwen2ForCausalLM";
  return "LlamaForCausalLM";
}

std::string llama_hf_config_json(const LlamaOptions& given, const std::string& torch_dtype) {
  const LlamaOptions o = resolved(given);
  const std::string arch = llama_hf_architecture(o);
  OrderedJson j;
  j["architectures"] = {arch};
  j["model_type"] = o.qk_norm ? "qwen3" : o.attention_bias ? "qwen2" : "llama";
  j["vocab_size"] = o.vocab;
  j["hidden_size"] = o.d_model;
  j["intermediate_size"] = o.d_hidden;
  j["num_hidden_layers"] = o.n_layers;
  j["num_attention_heads"] = o.n_head;
  j["num_key_value_heads"] = o.n_kv_head;
  j["head_dim"] = o.head_dim;
  j["max_position_embeddings"] = o.max_positions;
  j["rms_norm_eps"] = o.rms_norm_eps;
  j["rope_theta"] = o.rope_theta;
  if (o.rope_scaling.kind == RopeScaling::Kind::llama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", o.rope_scaling.factor},
                         {"low_freq_factor", o.rope_scaling.low_freq_factor},
                         {"high_freq_factor", o.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", o.rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["tie_word_embeddings"] = o.tie_word_embeddings;
  if (!o.attention_bias || o.qk_norm) j["attention_bias"] = o.attention_bias;
  j["attention_dropout"] = 0.0;
  j["hidden_act"] = "silu";
  j["mlp_bias"] = false;
  j["use_sliding_window"] = false;
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

bool is_llama_hf_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path config = fs::path(dir) / "config.json";
  if (!fs::is_directory(dir, ec) || !fs::is_regular_file(config, ec)) return false;
  // Only which family the config names: whether it is a good one is for the reader to say.
  Json j;
  try {
    j = parse_json(read_file(config.string()));
  } catch (const std::exception&) {
    return false;
  }
  if (!j.is_object()) return false;
  for (const Architecture& a : kArchitectures) {
    if (j.value("model_type", Json()) == a.model_type) return true;
    const Json archs = j.value("architectures", Json());
    if (archs.is_array() && archs.size() == 1 && archs[0] == a.name) return true;
  }
  return false;
}

}  // namespace ag
