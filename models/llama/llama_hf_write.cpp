// Writing a Llama-family model as a Hugging Face directory (llama_hf.h): config.json and one
// model.safetensors under the state_dict's names, which are Hugging Face's.
#include <filesystem>
#include <map>
#include <stdexcept>

#include "attograd/autograd/ops.h"
#include "attograd/core/kernels.h"
#include "attograd/layers/lora.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/safetensors.h"

namespace ag {

namespace {

// A LoRA layer's weight as the plain Linear it stands for: W + (alpha / r) B A, without
// changing the model. Other parameters as they are.
Tensor exported_weight(const std::string& name, const Tensor& value, const std::map<std::string, Module*>& modules) {
  const std::string suffix = ".weight";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return value;
  }
  const auto it = modules.find(name.substr(0, name.size() - suffix.size()));
  const auto* lora = it == modules.end() ? nullptr : dynamic_cast<const LoRALinear*>(it->second);
  if (!lora || lora->merged()) return value;
  const Tensor update = kernels::matmul(lora->lora_b().value(), lora->lora_a().value());  // (out, in)
  Tensor merged = value.clone();
  kernels::add_(merged, update, lora->scaling());
  return merged;
}

}  // namespace

void write_llama_hf(Llama& model, const std::string& out, HfWeightsDType dtype) {
  namespace fs = std::filesystem;
  if (model.head_weight().dtype() != DType::f32) {
    throw std::invalid_argument(std::string("write_llama_hf: the model is ") + dtype_name(model.head_weight().dtype()) +
                                "; Hugging Face directories are written from float32 (to(DType::f32) first)");
  }
  std::map<std::string, Module*> modules;
  for (const auto& [path, m] : model.named_modules()) modules[path] = m;
  SafetensorsFile file;
  file.metadata["format"] = "pt";  // what Hugging Face's loader looks for
  for (const auto& [name, p] : model.named_parameters()) {
    if (name.ends_with(".lora_a") || name.ends_with(".lora_b")) continue;  // merged into their weight
    const Tensor value = exported_weight(name, p.value(), modules);
    if (dtype == HfWeightsDType::bf16) file.add_bf16(name, value);
    else file.add(name, value);
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  if (!fs::is_directory(out)) {
    throw std::runtime_error("write_llama_hf: cannot create the directory '" + out + "'" +
                             (ec ? ": " + ec.message() : std::string()));
  }
  save_safetensors((fs::path(out) / "model.safetensors").string(), file);
  write_file_atomically((fs::path(out) / "config.json").string(),
                        llama_hf_config_json(model.options(), dtype == HfWeightsDType::bf16 ? "bfloat16" : "float32"));
}

}  // namespace ag
