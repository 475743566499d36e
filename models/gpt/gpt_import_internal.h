// What the files of GPT weight import share (gpt_import*.cpp); not a public header.
//   gpt_import.cpp          the layouts in safetensors files (attograd, Hugging Face, nanoGPT) and
//                           the public functions of gpt_weights.h
//   gpt_import_llmc.cpp     llm.c's .bin
//   gpt_import_sources.cpp  reading every parameter's values from where a layout says they lie
//   gpt_import_shape.cpp    the network a file of another tool describes
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attograd/models/gpt/gpt.h"
#include "attograd/models/gpt/gpt_weights.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/safetensors.h"

namespace ag::gpt_import {

// The prefix of Hugging Face's names in a whole GPT2LMHeadModel ("transformer.wte.weight").
inline const std::string kPrefix = "transformer.";

// "'a', 'b', 'c'": the first names of a file's tensors, for a message.
inline std::string first_names(const SafetensorsIndex& index) {
  std::string out;
  for (size_t i = 0; i < index.tensors.size() && i < 3; ++i) out += (i ? ", '" : "'") + index.tensors[i].name + "'";
  return out.empty() ? "no tensors" : out;
}

// std::runtime_error "GPT weights 'PATH': WHAT".
[[noreturn]] void fail(const std::string& path, const std::string& what);

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

// Reads every source into its parameter (`params` by the model's names), checking each stored
// tensor's CRC-32C where the file keeps one; elements of a parameter beyond its run are zeroed.
void read_sources(const FileReader& file, const std::vector<Source>& sources, std::map<std::string, Variable>& params);
std::map<std::string, Variable> params_by_name(const GPT& model);

// Whether the file starts with llm.c's magic; a file that is neither that nor a safetensors
// file (its first 8 bytes a header length that fits, then '{') is a std::runtime_error.
bool is_llmc(const FileReader& file);
// An llm.c .bin (version 3) into the model.
GPTWeightsLayout read_llmc(GPT& model, const FileReader& file);

}  // namespace ag::gpt_import
