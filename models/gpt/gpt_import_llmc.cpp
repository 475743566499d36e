// llm.c's GPT-2 checkpoint (.bin, version 3): a header of 256 int32, then every parameter as
// float32 in llm.c's order, each layer's tensors stacked over the layers (gpt_weights.h).
#include <cstring>
#include <string>
#include <vector>

#include "attograd/models/gpt/gpt_import_internal.h"

namespace ag::gpt_import {

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
  // llm.c's model has one activation, the tanh GELU: its weights in a model of another one would
  // compute another function.
  if (o.activation != Activation::gelu_tanh) {
    fail(path, std::string("llm.c's model uses the tanh GELU and this model ") + activation_name(o.activation) +
                   " (give --activation gelu_tanh, or a --preset of GPT-2)");
  }
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

}  // namespace ag::gpt_import
