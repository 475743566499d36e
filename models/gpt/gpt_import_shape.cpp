// GPT weights of another tool: the network their file describes (gpt_weights.h,
// gpt_shape_of_weights), from llm.c's header or from the tensors' shapes and a config.json.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "attograd/models/gpt/gpt_import_internal.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/safetensors.h"

namespace ag {

using gpt_import::fail;
using gpt_import::first_names;
using gpt_import::kPrefix;

GPTFileShape gpt_shape_of_weights(const std::string& path, const std::string& config, int64_t n_head,
                                  const std::string& activation) {
  const FileReader file(path);
  GPTFileShape out;
  GPTOptions& o = out.options;
  o.dropout = 0.0;
  if (gpt_import::is_llmc(file)) {
    if (file.size() < kLlmcHeaderInts * 4) {
      fail(path, "truncated llm.c header: the file has " + std::to_string(file.size()) + " bytes, fewer than the " +
                     std::to_string(kLlmcHeaderInts * 4) + " of the header");
    }
    int32_t h[kLlmcHeaderInts];
    file.read(0, h, sizeof h);
    const auto positive = [&](const char* field, int32_t v, int32_t high) {
      if (v < 1 || v > high) {
        fail(path, std::string("the llm.c header's ") + field + " is " + std::to_string(v) + ", outside [1, " +
                       std::to_string(high) + "]");
      }
      return int64_t{v};
    };
    out.layout = GPTWeightsLayout::llmc;
    o.block_size = positive("max_seq_len", h[2], static_cast<int32_t>(GPTLimits::block_size));
    o.vocab = positive("vocab_size", h[3], static_cast<int32_t>(GPTLimits::vocab));
    o.n_layers = positive("num_layers", h[4], static_cast<int32_t>(GPTLimits::n_layers));
    o.n_head = positive("num_heads", h[5], static_cast<int32_t>(GPTLimits::n_head));
    o.d_model = positive("channels", h[6], static_cast<int32_t>(GPTLimits::d_model));
    o.bias = true;
    o.activation = Activation::gelu_tanh;
    out.heads_from = out.activation_from = "the file's header";
    if (!config.empty() || n_head > 0 || !activation.empty()) {
      throw std::invalid_argument("GPT weights '" + path + "': an llm.c file says its heads and activation itself");
    }
    return out;
  }
  const SafetensorsIndex index = index_safetensors(file);
  if (index.find("embed.weight") != nullptr) {
    fail(path, "is an attograd checkpoint: its model is described in it (load_gpt_checkpoint reads it)");
  }
  const std::string prefix = index.find(kPrefix + "wte.weight") ? kPrefix : "";
  const auto shape_of = [&](const std::string& name, int64_t rank) {
    const SafetensorsTensorInfo* t = index.find(prefix + name);
    if (t == nullptr) fail(path, "has no '" + prefix + name + "' tensor: not a whole GPT-2 (its tensors begin " + first_names(index) + ")");
    if (t->shape.rank() != rank) {
      fail(path, "'" + prefix + name + "' has shape " + t->shape.str() + ", expected rank " + std::to_string(rank));
    }
    return t->shape;
  };
  const Shape wte = shape_of("wte.weight", 2), wpe = shape_of("wpe.weight", 2), attn = shape_of("h.0.attn.c_attn.weight", 2);
  o.vocab = wte[0];
  o.d_model = wte[1];
  o.block_size = wpe[0];
  out.layout = attn[0] < attn[1] ? GPTWeightsLayout::hugging_face : GPTWeightsLayout::nanogpt;
  o.n_layers = 0;
  while (index.find(prefix + "h." + std::to_string(o.n_layers) + ".attn.c_attn.weight") != nullptr) ++o.n_layers;
  o.bias = index.find(prefix + "h.0.attn.c_attn.bias") != nullptr;
  const bool hf = out.layout == GPTWeightsLayout::hugging_face;
  if (!config.empty()) {
    const GPTOptions c = gpt_options_from_hf_config(config);
    const auto same = [&](const char* key, int64_t in_config, int64_t in_file) {
      if (in_config != in_file) {
        fail(path, std::string("its tensors say ") + key + " " + std::to_string(in_file) + ", the config '" + config +
                       "' says " + std::to_string(in_config));
      }
    };
    same("n_embd", c.d_model, o.d_model);
    same("n_layer", c.n_layers, o.n_layers);
    same("vocab_size", c.vocab, o.vocab);
    same("n_positions", c.block_size, o.block_size);
    if (n_head > 0 && n_head != c.n_head) {
      throw std::invalid_argument("--heads " + std::to_string(n_head) + " contradicts " + config + ": its n_head is " +
                                  std::to_string(c.n_head));
    }
    if (!activation.empty() && parse_activation(activation) != c.activation) {
      throw std::invalid_argument("--activation " + activation + " contradicts " + config + ": its activation_function is " +
                                  activation_name(c.activation));
    }
    o.n_head = c.n_head;
    o.activation = c.activation;
    out.heads_from = out.activation_from = config;
  } else {
    if (n_head > 0) {
      o.n_head = n_head;
      out.heads_from = "--heads";
    } else if (hf && o.d_model % 64 == 0) {
      o.n_head = o.d_model / 64;
      out.heads_from = "d_model / 64, GPT-2's head size";
    } else {
      fail(path, std::string("does not say its number of heads (") + (hf ? "no config.json beside it, and d_model " +
                                                                               std::to_string(o.d_model) + " is not a multiple of 64"
                                                                         : "nanoGPT's files never do") +
                     "): give --heads");
    }
    o.activation = !activation.empty() ? parse_activation(activation) : hf ? Activation::gelu_tanh : Activation::gelu;
    out.activation_from = !activation.empty() ? "--activation" : hf ? "GPT-2's gelu_new" : "nanoGPT's nn.GELU";
  }
  if (o.d_model % o.n_head != 0) {
    throw std::invalid_argument("GPT weights '" + path + "': " + std::to_string(o.n_head) + " heads (" + out.heads_from +
                                ") do not divide d_model " + std::to_string(o.d_model));
  }
  return out;
}

}  // namespace ag
