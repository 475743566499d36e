// A Llama-family model as a Hugging Face directory, in and out:
//
//   my-model/config.json                      the architecture (LlamaForCausalLM, Qwen2ForCausalLM,
//                                             Qwen3ForCausalLM or MistralForCausalLM) and its sizes
//   my-model/model.safetensors                every tensor, or
//   my-model/model.safetensors.index.json     {"weight_map": {tensor name: shard file}} with the
//   my-model/model-00001-of-00002.safetensors shards it names
//
//   std::unique_ptr<Llama> model = load_llama_hf("SmolLM2-135M/");       // shape from config.json
//   write_llama_hf(*model, "my-model/", HfWeightsDType::bf16);           // the same layout back
//
// config.json's keys: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, head_dim, rms_norm_eps, rope_theta, rope_scaling (null, or type "llama3"
// with factor, low_freq_factor, high_freq_factor, original_max_position_embeddings),
// tie_word_embeddings, attention_bias, vocab_size, max_position_embeddings, hidden_act ("silu").
// Each architecture's own defaults apply where a key is absent (Qwen2 always has q/k/v biases,
// Qwen3 always q/k norms). What this model cannot compute is refused naming the key: another
// hidden_act, mlp_bias, pretraining_tp > 1, another rope_scaling type. Mistral's sliding_window
// caps the context at the window, where full attention and a sliding window are the same.
//
// Tensors are read one at a time, each straight into its parameter and converted from F32, BF16
// or F16 as it is read: the peak memory is the model in float32 plus one tensor. Every tensor's
// name, shape and dtype, and every shard's presence and length, are checked before any parameter
// changes; an error is a std::runtime_error naming the file and the tensor. A tied model's
// lm_head.weight, when a file has one, must equal the token table; rotary inv_freq buffers that
// old files carry are skipped.
//
// Export writes config.json (the architecture told by the options: Qwen3 with q/k norms, Qwen2
// with q/k/v biases, Llama otherwise) and model.safetensors (F32, or BF16 rounded to nearest
// even) with Hugging Face's names and the "format": "pt" metadata its loader asks for, atomically.
#pragma once

#include <memory>
#include <string>

#include "attograd/models/llama/llama.h"

namespace ag {

// The options config.json describes; std::runtime_error naming the file and the key.
LlamaOptions llama_options_from_hf_config(const std::string& config_path);
// The same from the config's text (a checkpoint's "model" entry, which is this config: the
// model's options_json()); `name` stands for the file in messages.
LlamaOptions llama_options_from_hf_json(const std::string& text, const std::string& name);
// The config.json of a model with these options (what write_llama_hf writes).
std::string llama_hf_config_json(const LlamaOptions& options, const std::string& torch_dtype = "float32");
// "LlamaForCausalLM", "Qwen2ForCausalLM" or "Qwen3ForCausalLM": the class that computes `options`.
const char* llama_hf_architecture(const LlamaOptions& options);

// Whether `dir` looks like a Hugging Face directory of this family (config.json with one of the
// architectures above).
bool is_llama_hf_directory(const std::string& dir);

// Reads the weights of directory `dir` into `model`, whose options must be the config's (the
// caller built it from llama_options_from_hf_config; checked again tensor by tensor).
void read_llama_hf(Llama& model, const std::string& dir);
// A model built from dir/config.json (without drawing an initialisation) and read from `dir`.
std::unique_ptr<Llama> load_llama_hf(const std::string& dir);

enum class HfWeightsDType { f32, bf16 };
// Writes `model` (f32) into directory `out` (created when missing): config.json and
// model.safetensors. std::invalid_argument for an f64 model, std::runtime_error for I/O.
void write_llama_hf(Llama& model, const std::string& out, HfWeightsDType dtype = HfWeightsDType::f32);

}  // namespace ag
