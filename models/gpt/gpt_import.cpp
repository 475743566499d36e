// Import of GPT weights (models/gpt/gpt_weights.h): each parameter of the model is given a Source,
// where its values lie in the file and how, every Source is checked against the file, and only
// then is anything read (gpt_import_sources.cpp). This file: the layouts kept in safetensors
// files, and telling the layouts apart; llm.c's is gpt_import_llmc.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/core/parallel.h"
#include "attograd/models/gpt/gpt_import_internal.h"
#include "attograd/models/gpt/gpt_options.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/safetensors.h"

namespace ag {

using gpt_import::fail;
using gpt_import::first_names;
using gpt_import::kPrefix;
using gpt_import::Source;

namespace {

// ---- safetensors: attograd, Hugging Face, nanoGPT ----

// The file's tensor for the model's parameter `param` (Hugging Face / nanoGPT names), given the
// layout; sets `stored` (the shape the file must hold) and the run or columns.
struct Mapping {
  std::string name;
  Shape stored;
  bool columns = false;
  int64_t first = 0, count = 0;
};

Mapping map_gpt2_name(const std::string& param, const Shape& shape, bool conv1d, const GPTOptions& o) {
  const int64_t C = o.d_model;
  if (param == "embed.weight") return {"wte.weight", Shape{o.vocab, C}, false, 0, o.vocab * C};
  if (param == "pos.weight") return {"wpe.weight", shape, false, 0, shape.numel()};
  if (param.rfind("norm.", 0) == 0) return {"ln_f." + param.substr(5), shape, false, 0, shape.numel()};
  // blocks.<l>.<rest>
  const size_t dot = param.find('.', 7);
  const std::string layer = "h." + param.substr(7, dot - 7) + ".";
  const std::string rest = param.substr(dot + 1);
  const std::string leaf = rest.substr(rest.rfind('.') + 1);
  const std::string module = rest.substr(0, rest.rfind('.'));
  static const std::map<std::string, std::string> kNames = {
      {"norm1", "ln_1"}, {"norm2", "ln_2"}, {"attn.w_o", "attn.c_proj"}, {"ff.linear1", "mlp.c_fc"}, {"ff.linear2", "mlp.c_proj"}};
  const int64_t part = module == "attn.w_q" ? 0 : module == "attn.w_k" ? 1 : module == "attn.w_v" ? 2 : -1;
  const std::string name = layer + (part >= 0 ? "attn.c_attn" : kNames.at(module)) + "." + leaf;
  if (shape.rank() == 1) {
    if (part < 0) return {name, shape, false, 0, shape.numel()};
    return {name, Shape{3 * C}, false, part * C, C};
  }
  const int64_t out = shape[0], in = shape[1];
  const int64_t stored_out = part < 0 ? out : 3 * out;
  if (conv1d) return {name, Shape{in, stored_out}, true, part < 0 ? 0 : part * out, out * in};
  return {name, Shape{stored_out, in}, false, part < 0 ? 0 : part * out * in, out * in};
}

void check_dtype(const std::string& path, const SafetensorsTensorInfo& t) {
  if (t.dtype == SafetensorsDType::I64) {
    fail(path, "tensor '" + t.name + "' holds integers (I64); weights must be F32, F64, F16 or BF16");
  }
}

// The attograd checkpoint's own options against the model's: what the shapes cannot tell.
void check_attograd_options(const std::string& path, const SafetensorsIndex& index, const GPTOptions& o) {
  const auto it = index.metadata.find("model");
  if (it == index.metadata.end()) return;
  GPTOptions file;
  try {
    file = gpt_options_from_json(it->second);
  } catch (const std::invalid_argument& e) {
    fail(path, std::string("its model entry is not a GPT's options: ") + e.what());
  }
  if (file.n_head != o.n_head) {
    fail(path, "the checkpoint's model has n_head " + std::to_string(file.n_head) + ", this model " + std::to_string(o.n_head));
  }
  if (file.activation != o.activation) {
    fail(path, std::string("the checkpoint's model uses ") + activation_name(file.activation) + ", this model " +
                   activation_name(o.activation));
  }
}

GPTWeightsLayout read_safetensors_weights(GPT& model, const FileReader& file) {
  const std::string& path = file.path();
  const SafetensorsIndex index = index_safetensors(file);
  const GPTOptions& o = model.options();
  std::map<std::string, const SafetensorsTensorInfo*> tensors;  // by name, the "transformer." prefix dropped
  const bool ours = index.find("embed.weight") != nullptr;
  for (const SafetensorsTensorInfo& t : index.tensors) {
    if (ours && t.name.rfind("optimizer/", 0) == 0) continue;
    const std::string name = !ours && t.name.rfind(kPrefix, 0) == 0 ? t.name.substr(kPrefix.size()) : t.name;
    // One tensor under both spellings: which one is the model's cannot be told.
    if (const auto [it, added] = tensors.emplace(name, &t); !added) {
      fail(path, "holds both '" + it->second->name + "' and '" + t.name + "', one tensor under two names");
    }
  }
  GPTWeightsLayout layout = GPTWeightsLayout::attograd;
  const std::string prefix = index.find(kPrefix + "wte.weight") ? kPrefix : "";
  if (!ours) {
    if (!tensors.count("wte.weight")) {
      fail(path, "holds none of GPT-2's tensors (no 'wte.weight' nor 'transformer.wte.weight', nor attograd's "
                 "'embed.weight'); its tensors begin " + first_names(index) + ": another architecture?");
    }
    int64_t layers = 0;
    for (const auto& [name, t] : tensors) {
      if (name.rfind("h.", 0) == 0) layers = std::max<int64_t>(layers, std::atoll(name.c_str() + 2) + 1);
    }
    if (layers != o.n_layers) {
      fail(path, "the file has " + std::to_string(layers) + " layers (" + prefix + "h.0 .. h." +
                     std::to_string(layers - 1) + "), the model " + std::to_string(o.n_layers));
    }
    const auto c_attn = tensors.find("h.0.attn.c_attn.weight");
    if (c_attn == tensors.end()) fail(path, "has no tensor '" + prefix + "h.0.attn.c_attn.weight'");
    const Shape& s = c_attn->second->shape;
    const int64_t C = o.d_model;
    if (s == Shape({C, 3 * C})) layout = GPTWeightsLayout::hugging_face;
    else if (s == Shape({3 * C, C})) layout = GPTWeightsLayout::nanogpt;
    else {
      fail(path, "tensor '" + c_attn->second->name + "' is " + s.str() + ", neither Hugging Face's Conv1D (d_model, "
                 "3 d_model) = " + Shape({C, 3 * C}).str() + " nor nanoGPT's (3 d_model, d_model) for the model's "
                 "d_model " + std::to_string(C));
    }
    if (!o.bias && tensors.count("h.0.attn.c_attn.bias")) {
      fail(path, "the file has biases ('" + prefix + "h.0.attn.c_attn.bias') and the model none (drop --no-bias)");
    }
  } else {
    check_attograd_options(path, index, o);
  }
  const bool conv1d = layout == GPTWeightsLayout::hugging_face;
  std::vector<Source> sources;
  std::set<std::string> used;
  for (const auto& [param, p] : model.named_parameters()) {
    Mapping m = ours ? Mapping{param, p.shape(), false, 0, p.shape().numel()} : map_gpt2_name(param, p.shape(), conv1d, o);
    const auto it = tensors.find(m.name);
    if (it == tensors.end()) {
      fail(path, "has no tensor '" + (ours ? "" : prefix) + m.name + "' (the model's " + param + ", " +
                     m.stored.str() + ")" + (param.find(".bias") != std::string::npos && !ours ? "; a file without biases needs --no-bias" : ""));
    }
    const SafetensorsTensorInfo& t = *it->second;
    check_dtype(path, t);
    // A model of a shorter context takes the first rows of the positions' table (nanoGPT's crop).
    if (!ours && param == "pos.weight" && t.shape.rank() == 2 && t.shape[1] == o.d_model && t.shape[0] >= o.block_size) {
      m.stored = t.shape;
    }
    if (t.shape != m.stored) {
      const bool table = m.name == "wte.weight";
      fail(path, "tensor '" + t.name + "' is " + t.shape.str() + " where the model's " + param + " needs " + m.stored.str() +
                     (table ? " (its first axis is the vocabulary: the tokenizer's vocab is " + std::to_string(o.vocab) + ")"
                            : ""));
    }
    used.insert(m.name);
    Source s;
    s.param = param, s.name = t.name, s.offset = index.data_start + t.begin, s.stored = t.shape, s.dtype = t.dtype;
    s.columns = m.columns, s.first = m.first, s.count = m.count;
    // A checksum covers a whole tensor: checked where one source reads all of it.
    const bool whole = !s.columns && s.first == 0 && s.count == t.shape.numel();
    if (const auto sum = index.checksums.find(t.name); whole && sum != index.checksums.end()) s.crc = sum->second;
    sources.push_back(s);
  }
  // What is left must be something GPT-2 files carry beside the weights.
  for (const auto& [name, t] : tensors) {
    if (used.count(name)) continue;
    const bool mask_buffer = name.rfind("h.", 0) == 0 && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"));
    if (!ours && mask_buffer) continue;
    if (!ours && name == "lm_head.weight") continue;  // compared with wte below
    fail(path, "tensor '" + t->name + "' " + t->shape.str() + " has no place in this model (another architecture?)");
  }
  if (const auto head = tensors.find("lm_head.weight"); !ours && head != tensors.end()) {
    const SafetensorsTensorInfo& h = *head->second;
    const SafetensorsTensorInfo& wte = *tensors.at("wte.weight");
    if (h.shape != wte.shape || h.dtype != wte.dtype) {
      fail(path, "tensor '" + h.name + "' is " + h.shape.str() + " where the tied head needs wte's " + wte.shape.str());
    }
    // Compared in pieces: the head is tied to the embedding here, so it must be the same table.
    constexpr size_t kPiece = size_t{1} << 22;
    std::vector<char> a(kPiece), b(kPiece);
    for (uint64_t at = 0; at < h.end - h.begin; at += kPiece) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, h.end - h.begin - at));
      file.read(index.data_start + h.begin + at, a.data(), n);
      file.read(index.data_start + wte.begin + at, b.data(), n);
      if (std::memcmp(a.data(), b.data(), n) != 0) {
        fail(path, "tensor '" + h.name + "' differs from '" + wte.name + "': this GPT ties its head to the token "
                   "embedding, an untied head cannot be imported");
      }
    }
  }
  std::map<std::string, Variable> params = gpt_import::params_by_name(model);
  gpt_import::read_sources(file, sources, params);
  return layout;
}

}  // namespace

const char* gpt_weights_layout_name(GPTWeightsLayout layout) {
  switch (layout) {
    case GPTWeightsLayout::attograd: return "attograd";
    case GPTWeightsLayout::hugging_face: return "Hugging Face";
    case GPTWeightsLayout::nanogpt: return "nanoGPT";
    case GPTWeightsLayout::llmc: return "llm.c";
  }
  return "unknown";
}

GPTWeightsLayout gpt_weights_layout(const std::string& path) {
  const FileReader file(path);
  if (gpt_import::is_llmc(file)) return GPTWeightsLayout::llmc;
  const SafetensorsIndex index = index_safetensors(file);
  // A checkpoint of ours says so in its metadata (an adapter-only one holds no embed.weight).
  const auto format = index.metadata.find("format");
  if (index.find("embed.weight") != nullptr || (format != index.metadata.end() && format->second == "attograd-checkpoint")) {
    return GPTWeightsLayout::attograd;
  }
  for (const std::string& prefix : {std::string(), kPrefix}) {
    if (const SafetensorsTensorInfo* t = index.find(prefix + "h.0.attn.c_attn.weight")) {
      return t->shape.rank() == 2 && t->shape[0] < t->shape[1] ? GPTWeightsLayout::hugging_face
                                                               : GPTWeightsLayout::nanogpt;
    }
  }
  fail(path, "holds none of GPT-2's tensors (no 'wte.weight' nor 'transformer.wte.weight', nor attograd's "
             "'embed.weight'); its tensors begin " + first_names(index) + ": another architecture?");
}

GPTOptions gpt_options_from_hf_config(const std::string& path) {
  Json config;
  try {
    config = parse_json(read_file(path));
  } catch (const JsonError& e) {
    throw std::runtime_error("Hugging Face config '" + path + "': not JSON: " + e.what());
  }
  const auto bad = [&](const std::string& what) -> std::runtime_error {
    return std::runtime_error("Hugging Face config '" + path + "': " + what);
  };
  if (!config.is_object()) throw bad("not a JSON object");
  const auto integer = [&](std::initializer_list<const char*> keys, int64_t low, int64_t high) {
    for (const char* key : keys) {
      const auto it = config.find(key);
      if (it == config.end() || it->is_null()) continue;
      if (!it->is_number_integer() || it->get<int64_t>() < low || it->get<int64_t>() > high) {
        throw bad(std::string("\"") + key + "\" is " + it->dump() + ", not a whole number in [" + std::to_string(low) + ", " +
                  std::to_string(high) + "]");
      }
      return it->get<int64_t>();
    }
    throw bad(std::string("has no \"") + *keys.begin() + "\": a GPT-2 config has n_layer, n_head, n_embd, n_positions "
              "and vocab_size");
  };
  if (const auto type = config.find("model_type"); type != config.end() && *type != "gpt2") {
    throw bad("model_type is " + type->dump() + ", not \"gpt2\": another architecture");
  }
  GPTOptions o;
  o.n_layers = integer({"n_layer"}, 1, GPTLimits::n_layers);
  o.n_head = integer({"n_head"}, 1, GPTLimits::n_head);
  o.d_model = integer({"n_embd"}, 1, GPTLimits::d_model);
  o.block_size = integer({"n_positions", "n_ctx"}, 1, GPTLimits::block_size);
  o.vocab = integer({"vocab_size"}, 1, GPTLimits::vocab);
  o.bias = true;
  o.activation = Activation::gelu_tanh;  // GPT-2's, and transformers' default
  if (const auto act = config.find("activation_function"); act != config.end()) {
    const std::string a = act->is_string() ? act->get<std::string>() : act->dump();
    if (a == "gelu_new" || a == "gelu_pytorch_tanh" || a == "gelu_fast") o.activation = Activation::gelu_tanh;
    else if (a == "gelu") o.activation = Activation::gelu;
    else if (a == "relu") o.activation = Activation::relu;
    else throw bad("activation_function \"" + a + "\" is none of gelu_new, gelu_pytorch_tanh, gelu, relu");
  }
  if (const auto eps = config.find("layer_norm_epsilon"); eps != config.end() && eps->is_number() &&
                                                          std::abs(eps->get<double>() - 1e-5) > 1e-12) {
    throw bad("layer_norm_epsilon is " + eps->dump() + "; this GPT's LayerNorm uses 1e-5");
  }
  if (const auto inner = config.find("n_inner"); inner != config.end() && !inner->is_null() &&
                                                   !(inner->is_number_integer() && inner->get<int64_t>() == 4 * o.d_model)) {
    throw bad("n_inner is " + inner->dump() + "; this GPT's MLP is 4 n_embd = " + std::to_string(4 * o.d_model) + " wide");
  }
  if (const auto tied = config.find("tie_word_embeddings"); tied != config.end() && *tied == false) {
    throw bad("tie_word_embeddings is false; this GPT ties its head to the token embedding");
  }
  if (o.d_model % o.n_head != 0) {
    throw bad("n_head " + std::to_string(o.n_head) + " does not divide n_embd " + std::to_string(o.d_model));
  }
  return o;
}

GPTWeightsLayout read_gpt_weights(GPT& model, const std::string& path) {
  const FileReader file(path);
  if (gpt_import::is_llmc(file)) return gpt_import::read_llmc(model, file);
  return read_safetensors_weights(model, file);
}

}  // namespace ag
