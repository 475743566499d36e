// Reading a Hugging Face Llama-family directory (llama_hf.h): the index of shards or the single
// file, every tensor matched to a parameter and checked, then each read straight into it.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/core/skip_init.h"
#include "attograd/models/llama/llama_hf.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/safetensors.h"

namespace ag {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("Hugging Face weights '" + path + "': " + what);
}

// Where one tensor lies: its file and its entry in that file's header.
struct Located {
  const FileReader* file = nullptr;
  const SafetensorsIndex* index = nullptr;
  const SafetensorsTensorInfo* info = nullptr;
};

// The files of a directory with every tensor the weight map (or the single file) names.
struct Shards {
  std::vector<std::unique_ptr<FileReader>> files;
  std::vector<std::unique_ptr<SafetensorsIndex>> indexes;
  std::map<std::string, Located> tensors;
};

void open_file(Shards& s, const std::string& path) {
  s.files.push_back(std::make_unique<FileReader>(path));
  s.indexes.push_back(std::make_unique<SafetensorsIndex>(index_safetensors(*s.files.back())));
}

Shards open_shards(const std::string& dir) {
  Shards s;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    const std::string where = index_path.string();
    Json index;
    try {
      index = parse_json(read_file(where));
    } catch (const JsonError& e) {
      fail(where, std::string("not JSON: ") + e.what());
    }
    const auto map = index.is_object() ? index.find("weight_map") : index.end();
    if (!index.is_object() || map == index.end() || !map->is_object() || map->empty()) {
      fail(where, "has no \"weight_map\" object of tensor name -> shard file");
    }
    std::map<std::string, size_t> shard_of;  // shard file name -> its place in s.files
    for (const auto& [name, shard] : map->items()) {
      if (!shard.is_string()) fail(where, "weight_map[\"" + name + "\"] is " + shard.dump() + ", not a file name");
      const std::string file = shard.get<std::string>();
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
        fail(where, "weight_map[\"" + name + "\"] names \"" + file + "\", not a file of this directory");
      }
      if (!shard_of.count(file)) {
        const fs::path p = fs::path(dir) / file;
        if (!fs::is_regular_file(p, ec)) fail(where, "names shard \"" + file + "\", which is missing from " + dir);
        shard_of[file] = s.files.size();
        open_file(s, p.string());
      }
      const size_t i = shard_of[file];
      const SafetensorsTensorInfo* info = s.indexes[i]->find(name);
      if (!info) fail(where, "says tensor '" + name + "' is in shard \"" + file + "\", which has no such tensor");
      s.tensors[name] = {s.files[i].get(), s.indexes[i].get(), info};
    }
    return s;
  }
  if (!fs::exists(single, ec)) {
    fail(dir, "has neither model.safetensors nor model.safetensors.index.json");
  }
  open_file(s, single.string());
  for (const SafetensorsTensorInfo& info : s.indexes[0]->tensors) {
    s.tensors[info.name] = {s.files[0].get(), s.indexes[0].get(), &info};
  }
  return s;
}

// The tensor's bytes, its checksum verified when the file has checksums (ours do).
std::vector<char> read_bytes(const Located& at) {
  std::vector<char> bytes(static_cast<size_t>(at.info->end - at.info->begin));
  at.file->read(at.index->data_start + at.info->begin, bytes.data(), bytes.size());
  const auto sum = at.index->checksums.find(at.info->name);
  if (sum != at.index->checksums.end() && crc32c(bytes.data(), bytes.size()) != sum->second) {
    fail(at.file->path(), "tensor '" + at.info->name + "' does not match its CRC-32C: the file is damaged");
  }
  return bytes;
}

// bytes (stored dtype) -> dst (f32 or f64), n elements; the first value that is not finite or
// beyond checkpoint.h's bound is named instead.
void convert(const Located& at, const std::vector<char>& bytes, Tensor* dst) {
  const int64_t n = at.info->shape.numel();
  const size_t elem = safetensors_element_size(at.info->dtype);
  with_stored_type(at.info->dtype, [&]<typename From>(From) {
    for (int64_t i = 0; i < n; ++i) {
      From stored;
      std::memcpy(&stored, bytes.data() + static_cast<size_t>(i) * elem, sizeof stored);
      const double v = static_cast<double>(stored);
      if (!std::isfinite(v) || std::abs(v) > kMaxParameterMagnitude) {
        std::ostringstream value;
        value << v;
        fail(at.file->path(), "tensor '" + at.info->name + "' holds " + value.str() + " at element " +
                                  std::to_string(i) + " (weights must be finite and within " +
                                  format_number(kMaxParameterMagnitude) + "); nothing was read");
      }
      if (!dst) continue;
      if (dst->dtype() == DType::f32) dst->data<float>()[i] = static_cast<float>(v);
      else dst->data<double>()[i] = v;
    }
  });
}

bool is_rotary_buffer(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void read_llama_hf(Llama& model, const std::string& dir) {
  const Shards shards = open_shards(dir);
  const bool tied = model.options().tie_word_embeddings;
  std::map<std::string, Variable> params;
  for (const auto& [name, p] : model.named_parameters()) params[name] = p;
  // Every tensor of the files is a parameter, a tied head, or a rotary buffer to skip.
  std::vector<std::string> unknown;
  for (const auto& [name, at] : shards.tensors) {
    if (!params.count(name) && !(tied && name == "lm_head.weight") && !is_rotary_buffer(name)) unknown.push_back(name);
  }
  if (!unknown.empty()) {
    std::string list;
    for (size_t i = 0; i < unknown.size() && i < 5; ++i) list += (i ? ", " : "") + unknown[i];
    fail(shards.files.front()->path(), std::to_string(unknown.size()) + " tensor(s) this " +
                                           llama_hf_architecture(model.options()) + " has no place for: " + list +
                                           (unknown.size() > 5 ? ", ..." : "") + " (does config.json describe them?)");
  }
  // Every parameter is there, with its shape and a float dtype; then every value is checked.
  std::vector<std::pair<Variable, Located>> reads;
  for (const auto& [name, p] : params) {
    const auto it = shards.tensors.find(name);
    if (it == shards.tensors.end()) fail(dir, "no tensor '" + name + "' (a " + p.shape().str() + " parameter)");
    const Located& at = it->second;
    if (at.info->dtype == SafetensorsDType::I64) fail(at.file->path(), "tensor '" + name + "' is I64, not a float type");
    if (at.info->shape != p.shape()) {
      fail(at.file->path(), "tensor '" + name + "' is " + at.info->shape.str() + " but config.json makes it " +
                                p.shape().str());
    }
    reads.emplace_back(p, at);
  }
  const auto head = shards.tensors.find("lm_head.weight");
  const bool check_head = tied && head != shards.tensors.end();
  if (check_head && head->second.info->shape != model.head_weight().shape()) {
    fail(head->second.file->path(), "tensor 'lm_head.weight' is " + head->second.info->shape.str() +
                                        " but the tied head is " + model.head_weight().shape().str());
  }
  for (const auto& [p, at] : reads) convert(at, read_bytes(at), nullptr);
  if (check_head) {  // a tied file's head must be the table it is tied to
    const Located& table = shards.tensors.at("model.embed_tokens.weight");
    Tensor a(model.head_weight().shape(), DType::f64), b(model.head_weight().shape(), DType::f64);
    convert(head->second, read_bytes(head->second), &a);
    convert(table, read_bytes(table), &b);
    if (std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.numel()) * sizeof(double)) != 0) {
      fail(head->second.file->path(), "config.json ties the head to the token table, but lm_head.weight differs "
                                      "from model.embed_tokens.weight");
    }
  }
  // Nothing has changed so far; now each tensor goes into its parameter.
  for (auto& [p, at] : reads) {
    Variable handle = p;
    Tensor& value = handle.mutable_value();
    convert(at, read_bytes(at), &value);
  }
}

std::unique_ptr<Llama> load_llama_hf(const std::string& dir) {
  const LlamaOptions options = llama_options_from_hf_config((fs::path(dir) / "config.json").string());
  std::unique_ptr<Llama> model;
  {
    SkipInitGuard no_init;  // every parameter is about to be read
    model = std::make_unique<Llama>(options);
  }
  read_llama_hf(*model, dir);
  return model;
}

}  // namespace ag
