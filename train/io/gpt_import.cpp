// Import of GPT weights (train/io/gpt_weights.h): each parameter of the model is given a Source,
// where its values lie in the file and how, every Source is checked against the file, and only
// then is anything read.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "attograd/core/format.h"
#include "attograd/core/parallel.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/gpt_weights.h"
#include "attograd/train/io/model_options.h"
#include "attograd/train/io/safetensors.h"

namespace ag {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("GPT weights '" + path + "': " + what);
}

// Where one parameter's values are in the file. A parameter is either a run of `count`
// consecutive stored elements from element `first` (every (out, in) layout, a third of a fused
// q/k/v, one layer of llm.c's stacked tensors), or, for Hugging Face's Conv1D weights stored
// (in, N), the transpose of columns [first, first + out). A parameter larger than the run (a
// padded table) has its other elements zeroed.
struct Source {
  std::string param;  // the model's name for it
  std::string name;   // the file's name for the stored tensor
  uint64_t offset = 0;  // of the stored tensor's first byte in the file
  Shape stored;
  SafetensorsDType dtype = SafetensorsDType::F32;
  bool columns = false;
  int64_t first = 0, count = 0;
  std::optional<uint32_t> crc;  // of the whole stored tensor, when the file keeps one
};

size_t bytes_of(SafetensorsDType d) { return d == SafetensorsDType::F32 ? 4 : 8; }

// n values of type From at `in` into To at `out`.
template <typename From, typename To>
void convert(const void* in, To* out, int64_t n) {
  const From* src = static_cast<const From*>(in);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(src[i]);
}

template <typename To>
void convert_any(SafetensorsDType from, const void* in, To* out, int64_t n) {
  if (from == SafetensorsDType::F32) convert<float>(in, out, n);
  else convert<double>(in, out, n);
}

// dst (out, in) = columns [first, first + out) of src (in, n), transposed, in tiles of 32 x 32:
// each tile is read as 32 runs of 32 consecutive source values and written as 32 runs of 32
// consecutive destination values, so both sides stream; the tile rows are split over the pool.
template <typename From, typename To>
void transpose_columns(const From* src, int64_t in, int64_t n, int64_t first, To* dst, int64_t out) {
  constexpr int64_t kTile = 32;
  const int64_t tiles = (out + kTile - 1) / kTile;
  parallel_for(tiles, parallel_chunks(tiles, 4.0 * static_cast<double>(out) * static_cast<double>(in)),
               [&](int64_t begin, int64_t end) {
                 To tile[kTile][kTile];
                 for (int64_t t = begin; t < end; ++t) {
                   const int64_t o0 = t * kTile, os = std::min(kTile, out - o0);
                   for (int64_t i0 = 0; i0 < in; i0 += kTile) {
                     const int64_t is = std::min(kTile, in - i0);
                     for (int64_t i = 0; i < is; ++i) {
                       const From* row = src + (i0 + i) * n + first + o0;
                       for (int64_t o = 0; o < os; ++o) tile[o][i] = static_cast<To>(row[o]);
                     }
                     for (int64_t o = 0; o < os; ++o) std::memcpy(dst + (o0 + o) * in + i0, tile[o], static_cast<size_t>(is) * sizeof(To));
                   }
                 }
               });
}

// Reads every source into its parameter. `scratch` holds a stored tensor that is transposed or
// converted; the Conv1D c_attn weight serves three parameters and is read once.
void read_sources(const FileReader& file, const std::vector<Source>& sources, std::map<std::string, Variable>& params) {
  std::vector<char> scratch;
  std::string in_scratch;  // the stored tensor scratch holds whole, if any
  for (const Source& s : sources) {
    Variable p = params.at(s.param);
    Tensor& value = p.mutable_value();
    const size_t elem = bytes_of(s.dtype);
    const bool same_type = (s.dtype == SafetensorsDType::F32) == (value.dtype() == DType::f32);
    if (s.columns) {
      if (in_scratch != s.name) {
        scratch.resize(static_cast<size_t>(s.stored.numel()) * elem);
        file.read(s.offset, scratch.data(), scratch.size());
        in_scratch = s.name;
      }
      const int64_t in = s.stored[0], n = s.stored[1], out = value.shape()[0];
      dispatch(value.dtype(), [&]<typename T>(T) {
        if (s.dtype == SafetensorsDType::F32) {
          transpose_columns(reinterpret_cast<const float*>(scratch.data()), in, n, s.first, value.data<T>(), out);
        } else {
          transpose_columns(reinterpret_cast<const double*>(scratch.data()), in, n, s.first, value.data<T>(), out);
        }
      });
      continue;
    }
    const uint64_t at = s.offset + static_cast<uint64_t>(s.first) * elem;
    const size_t bytes = static_cast<size_t>(s.count) * elem;
    const void* read_to = nullptr;
    if (same_type) {
      file.read(at, value.raw_data(), bytes);
      read_to = value.raw_data();
    } else {
      scratch.resize(bytes);
      in_scratch.clear();
      file.read(at, scratch.data(), bytes);
      read_to = scratch.data();
      dispatch(value.dtype(), [&]<typename T>(T) { convert_any(s.dtype, scratch.data(), value.data<T>(), s.count); });
    }
    if (s.crc && crc32c(read_to, bytes) != *s.crc) {
      fail(file.path(), "tensor '" + s.name + "' fails its CRC-32C check: its bytes were changed after it was written");
    }
    const int64_t rest = value.numel() - s.count;
    if (rest > 0) std::memset(static_cast<char*>(value.raw_data()) + s.count * dtype_size(value.dtype()), 0,
                              static_cast<size_t>(rest) * dtype_size(value.dtype()));
  }
}

std::map<std::string, Variable> params_by_name(const GPT& model) {
  std::map<std::string, Variable> out;
  for (const auto& [name, p] : model.named_parameters()) out.emplace(name, p);
  return out;
}

// ---- llm.c ----

// The stored tensors of an llm.c file in their order, with their element counts.
struct LlmcTensor {
  const char* name;
  int64_t numel;
};

GPTWeightsLayout read_llmc(GPT& model, const FileReader& file) {
  const std::string& path = file.path();
  const GPTOptions& o = model.options();
  if (file.size() < kLlmcHeaderInts * 4) {
    fail(path, "truncated llm.c header: the file has " + std::to_string(file.size()) + " bytes, fewer than the " +
                   std::to_string(kLlmcHeaderInts * 4) + " of the header");
  }
  int32_t h[kLlmcHeaderInts];
  file.read(0, h, sizeof h);
  if (h[1] == kLlmcVersionBF16) {
    fail(path, "llm.c version 5 (bfloat16 weights) is not read here; write the model as float32 (version 3, "
               "llm.c's default for gpt2_124M.bin)");
  }
  if (h[1] != kLlmcVersionF32) {
    fail(path, "unknown llm.c version " + std::to_string(h[1]) + " in the header (3 is float32, 5 bfloat16; "
               "version 3 is read here)");
  }
  const int64_t max_t = h[2], vocab = h[3], layers = h[4], heads = h[5], C = h[6], padded = h[7];
  const auto same = [&](const char* field, int64_t file_value, const char* option, int64_t model_value) {
    if (file_value != model_value) {
      fail(path, std::string("the header's ") + field + " is " + std::to_string(file_value) + ", the model's " + option +
                     " " + std::to_string(model_value) + " (another architecture or size: choose the preset or flags "
                     "that match the file)");
    }
  };
  same("vocab_size", vocab, "vocab", o.vocab);
  same("num_layers", layers, "n_layers", o.n_layers);
  same("num_heads", heads, "n_head", o.n_head);
  same("channels", C, "d_model", o.d_model);
  if (max_t < o.block_size) {
    fail(path, "the header's max_seq_len is " + std::to_string(max_t) + ", shorter than the model's block_size " +
                   std::to_string(o.block_size) + " (a shorter context takes the first positions; a longer one has none to read)");
  }
  if (padded < vocab) {
    fail(path, "the header's padded_vocab_size " + std::to_string(padded) + " is smaller than its vocab_size " +
                   std::to_string(vocab));
  }
  if (!o.bias) fail(path, "llm.c's model has biases and this model has none (drop --no-bias)");
  const int64_t L = layers;
  const LlmcTensor order[] = {{"wte", padded * C},        {"wpe", max_t * C},        {"ln1w", L * C},
                              {"ln1b", L * C},            {"qkvw", L * 3 * C * C},   {"qkvb", L * 3 * C},
                              {"attprojw", L * C * C},    {"attprojb", L * C},       {"ln2w", L * C},
                              {"ln2b", L * C},            {"fcw", L * 4 * C * C},    {"fcb", L * 4 * C},
                              {"fcprojw", L * C * 4 * C}, {"fcprojb", L * C},        {"lnfw", C},
                              {"lnfb", C}};
  std::map<std::string, uint64_t> offset;
  uint64_t at = kLlmcHeaderInts * 4;
  for (const LlmcTensor& t : order) {
    const uint64_t end = at + static_cast<uint64_t>(t.numel) * 4;
    if (end > file.size()) {
      fail(path, "truncated: tensor '" + std::string(t.name) + "' needs bytes [" + std::to_string(at) + ", " +
                     std::to_string(end) + ") but the file has " + std::to_string(file.size()) + " bytes");
    }
    offset[t.name] = at;
    at = end;
  }
  if (at != file.size()) {
    fail(path, std::to_string(file.size() - at) + " bytes follow the last tensor (lnfb), which ends at byte " +
                   std::to_string(at) + ": not the model its header describes");
  }
  std::vector<Source> sources;
  const auto add = [&](const std::string& param, const char* name, int64_t first, int64_t count) {
    Source s;
    s.param = param, s.name = name, s.offset = offset.at(name), s.first = first, s.count = count;
    sources.push_back(std::move(s));
  };
  add("embed.weight", "wte", 0, vocab * C);
  add("pos.weight", "wpe", 0, o.block_size * C);  // a shorter context: the first positions
  for (int64_t l = 0; l < L; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    add(b + "norm1.weight", "ln1w", l * C, C);
    add(b + "norm1.bias", "ln1b", l * C, C);
    const char* parts[] = {"w_q", "w_k", "w_v"};
    for (int64_t p = 0; p < 3; ++p) {
      add(b + "attn." + parts[p] + ".weight", "qkvw", (l * 3 + p) * C * C, C * C);
      add(b + "attn." + parts[p] + ".bias", "qkvb", (l * 3 + p) * C, C);
    }
    add(b + "attn.w_o.weight", "attprojw", l * C * C, C * C);
    add(b + "attn.w_o.bias", "attprojb", l * C, C);
    add(b + "norm2.weight", "ln2w", l * C, C);
    add(b + "norm2.bias", "ln2b", l * C, C);
    add(b + "ff.linear1.weight", "fcw", l * 4 * C * C, 4 * C * C);
    add(b + "ff.linear1.bias", "fcb", l * 4 * C, 4 * C);
    add(b + "ff.linear2.weight", "fcprojw", l * C * 4 * C, 4 * C * C);
    add(b + "ff.linear2.bias", "fcprojb", l * C, C);
  }
  add("norm.weight", "lnfw", 0, C);
  add("norm.bias", "lnfb", 0, C);
  std::map<std::string, Variable> params = params_by_name(model);
  read_sources(file, sources, params);
  return GPTWeightsLayout::llmc;
}

// ---- safetensors: attograd, Hugging Face, nanoGPT ----

const std::string kPrefix = "transformer.";

std::string first_names(const SafetensorsIndex& index) {
  std::string out;
  for (size_t i = 0; i < index.tensors.size() && i < 3; ++i) out += (i ? ", '" : "'") + index.tensors[i].name + "'";
  return out.empty() ? "no tensors" : out;
}

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
    fail(path, "tensor '" + t.name + "' holds integers (I64); weights must be F32 or F64");
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
    tensors[name] = &t;
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
  std::map<std::string, Variable> params = params_by_name(model);
  read_sources(file, sources, params);
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

namespace {

// What the first bytes say: llm.c's magic, or a safetensors header; std::runtime_error otherwise.
bool is_llmc(const FileReader& file) {
  const std::string& path = file.path();
  char head[9] = {};
  file.read(0, head, static_cast<size_t>(std::min<uint64_t>(file.size(), 9)));
  int32_t magic = 0;
  std::memcpy(&magic, head, 4);
  if (file.size() >= 4 && magic == kLlmcMagic) return true;
  uint64_t header_len = 0;
  std::memcpy(&header_len, head, 8);
  if (file.size() < 9 || header_len > file.size() - 8 || head[8] != '{') {
    fail(path, "is neither a safetensors file (8 bytes of header length, then a JSON header) nor an llm.c model "
               "(its first int32 is " + std::to_string(magic) + ", llm.c's magic is " + std::to_string(kLlmcMagic) + ")");
  }
  return false;
}

}  // namespace

GPTWeightsLayout gpt_weights_layout(const std::string& path) {
  const FileReader file(path);
  if (is_llmc(file)) return GPTWeightsLayout::llmc;
  const SafetensorsIndex index = index_safetensors(file);
  if (index.find("embed.weight") != nullptr) return GPTWeightsLayout::attograd;
  for (const std::string& prefix : {std::string(), kPrefix}) {
    if (const SafetensorsTensorInfo* t = index.find(prefix + "h.0.attn.c_attn.weight")) {
      return t->shape.rank() == 2 && t->shape[0] < t->shape[1] ? GPTWeightsLayout::hugging_face
                                                               : GPTWeightsLayout::nanogpt;
    }
  }
  fail(path, "holds none of GPT-2's tensors (no 'wte.weight' nor 'transformer.wte.weight', nor attograd's "
             "'embed.weight'); its tensors begin " + first_names(index) + ": another architecture?");
}

GPTWeightsLayout read_gpt_weights(GPT& model, const std::string& path) {
  const FileReader file(path);
  if (is_llmc(file)) return read_llmc(model, file);
  return read_safetensors_weights(model, file);
}

}  // namespace ag
