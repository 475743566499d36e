#include "attograd/train/finetune.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "attograd/core/rng.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"

namespace ag {

namespace {

bool glob(const char* p, const char* s) {
  // Iterative wildcard match with one backtracking point (the last '*').
  const char *star = nullptr, *resume = nullptr;
  while (*s != '\0') {
    if (*p == '?' || (*p != '*' && *p == *s)) {
      ++p, ++s;
    } else if (*p == '*') {
      star = p++;
      resume = s;
    } else if (star != nullptr) {
      p = star + 1;
      s = ++resume;
    } else {
      return false;
    }
  }
  while (*p == '*') ++p;
  return *p == '\0';
}

std::string list_of(const std::vector<std::string>& names, size_t most) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > most) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

const std::string kOp = "finetune entry: ";

std::string finetune_json(const FineTuneOptions& o, const BaseWeights* base) {
  OrderedJson j = OrderedJson::object();
  if (base != nullptr) {
    j["init_from"] = {{"path", base->path}, {"bytes", base->bytes}, {"crc32c", base->crc32c}};
  } else {
    j["init_from"] = nullptr;
  }
  j["freeze"] = o.freeze;
  if (o.lora_rank > 0) {
    j["lora"] = {{"rank", o.lora_rank}, {"alpha", o.lora().alpha}, {"targets", o.lora_targets}};
  } else {
    j["lora"] = nullptr;
  }
  j["adapter_only"] = o.adapter_only;
  return j.dump();
}

std::vector<std::string> strings(const Json& v, const char* key) {
  if (!v.is_array()) throw std::invalid_argument(std::string(kOp) + "\"" + key + "\" must be an array of strings");
  std::vector<std::string> out;
  for (const Json& s : v) {
    if (!s.is_string()) throw std::invalid_argument(std::string(kOp) + "\"" + key + "\" must be an array of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

struct Entry {
  FineTuneOptions options;
  BaseWeights base;
};

Entry entry_from_json(const std::string& text) {
  const Json j = parse_options_object(text, {"init_from", "freeze", "lora", "adapter_only"}, kOp);
  const OptionFields f{j, kOp, text};
  Entry e;
  if (!f.field("init_from").is_null()) {
    const std::string inner = f.field("init_from").dump();
    const Json b = parse_options_object(inner, {"path", "bytes", "crc32c"}, kOp);
    const OptionFields g{b, kOp, inner};
    e.base = {.path = g.string("path"), .bytes = static_cast<uint64_t>(g.integer("bytes")),
              .crc32c = static_cast<uint32_t>(g.integer("crc32c"))};
    e.options.init_from = e.base.path;
  }
  e.options.freeze = strings(f.field("freeze"), "freeze");
  if (!f.field("lora").is_null()) {
    const std::string inner = f.field("lora").dump();
    const Json l = parse_options_object(inner, {"rank", "alpha", "targets"}, kOp);
    const OptionFields g{l, kOp, inner};
    e.options.lora_rank = g.integer("rank");
    e.options.lora_alpha = g.number("alpha");
    e.options.lora_targets = strings(g.field("targets"), "targets");
    if (e.options.lora_rank < 1) throw std::invalid_argument(std::string(kOp) + "LoRA rank must be positive");
    if (e.options.lora_targets.empty()) throw std::invalid_argument(std::string(kOp) + "LoRA names no targets");
  }
  e.options.adapter_only = f.boolean("adapter_only");
  return e;
}

void require_same_base(const std::string& checkpoint, const BaseWeights& recorded) {
  const BaseWeights now = describe_base_weights(recorded.path);
  if (now.bytes != recorded.bytes || now.crc32c != recorded.crc32c) {
    throw std::runtime_error("checkpoint '" + checkpoint + "' holds an adapter trained on the base '" + recorded.path +
                             "' of " + std::to_string(recorded.bytes) + " bytes with CRC-32C " +
                             std::to_string(recorded.crc32c) + ", but that base now has " + std::to_string(now.bytes) +
                             " bytes with CRC-32C " + std::to_string(now.crc32c) +
                             ": the adapter would land on another base (put the original base back)");
  }
}

// The files of a directory that hold a model's weights and shape, in a fixed order.
std::vector<std::filesystem::path> weight_files(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out, shards;
  for (const char* name : {"config.json", "model.safetensors.index.json"}) {
    if (fs::is_regular_file(dir / name)) out.push_back(dir / name);
  }
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".safetensors") shards.push_back(e.path());
  }
  if (ec) throw std::runtime_error("base weights '" + dir.string() + "': cannot be listed (" + ec.message() + ")");
  std::sort(shards.begin(), shards.end());
  out.insert(out.end(), shards.begin(), shards.end());
  if (shards.empty()) throw std::runtime_error("base weights '" + dir.string() + "': the directory holds no *.safetensors");
  return out;
}

void add_file(BaseWeights& b, const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("base weights '" + path.string() + "': cannot be read");
  std::vector<char> chunk(size_t{1} << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(in.gcount());
    b.crc32c = crc32c(chunk.data(), got, b.crc32c);
    b.bytes += got;
  }
  if (in.bad()) throw std::runtime_error("base weights '" + path.string() + "': reading failed");
}

}  // namespace

bool parameter_matches(const std::string& pattern, const std::string& name) {
  if (glob(pattern.c_str(), name.c_str())) return true;
  return glob((pattern + ".*").c_str(), name.c_str());
}

void freeze_parameters(Module& model, const std::vector<std::string>& patterns) {
  const NamedVariables params = model.named_parameters();
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  for (const std::string& pattern : patterns) {
    bool any = false;
    for (const std::string& name : names) any = any || parameter_matches(pattern, name);
    if (!any) {
      throw std::invalid_argument("freeze: the pattern '" + pattern + "' names no parameter of the " + model.name() +
                                  "; its parameters are " + list_of(names, 12));
    }
  }
  for (const auto& [name, p] : params) {
    for (const std::string& pattern : patterns) {
      if (parameter_matches(pattern, name)) {
        Variable handle = p;
        handle.set_requires_grad(false);
      }
    }
  }
}

BaseWeights describe_base_weights(const std::string& path) {
  namespace fs = std::filesystem;
  BaseWeights b;
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  b.path = ec ? path : absolute.lexically_normal().string();
  if (fs::is_directory(path, ec)) {
    for (const fs::path& file : weight_files(path)) add_file(b, file);
  } else {
    add_file(b, path);
  }
  return b;
}

void check_finetune_options(const FineTuneOptions& o) {
  if (o.adapter_only && o.init_from.empty()) {
    throw std::invalid_argument("finetune: saving only the adapter needs the base it adapts (init_from)");
  }
  if (o.lora_rank < 0 || !(o.lora_alpha >= 0)) {
    throw std::invalid_argument("finetune: LoRA rank " + std::to_string(o.lora_rank) + " and alpha " +
                                std::to_string(o.lora_alpha) + " must not be negative");
  }
  if (o.adapter_only && o.lora_rank == 0 && o.freeze.empty()) {
    throw std::invalid_argument("finetune: saving only the trainable parameters needs some frozen ones (LoRA or freeze)");
  }
  if (o.lora_rank > 0 && o.lora_targets.empty()) {
    throw std::invalid_argument("finetune: LoRA of rank " + std::to_string(o.lora_rank) + " names no target layer");
  }
}

void adapt_for_finetune(Module& model, const FineTuneOptions& o) {
  if (o.lora_rank > 0) {
    apply_lora(model, o.lora_targets, o.lora());
    // peft's default: only the adapters train.
    for (auto& [name, p] : model.named_parameters()) {
      const bool adapter = name.ends_with(".lora_a") || name.ends_with(".lora_b");
      if (!adapter) {
        Variable handle = p;
        handle.set_requires_grad(false);
      }
    }
  }
  freeze_parameters(model, o.freeze);
}

void check_finetune_names(Module& twin, const FineTuneOptions& o) {
  FineTuneOptions narrow = o;
  if (narrow.lora_rank > 0) narrow.lora_rank = 1;
  adapt_for_finetune(twin, narrow);
}

std::string prepare_finetune_with(Module& model, const FineTuneOptions& o, const LoadBaseWeights& load,
                                  bool base_loaded) {
  check_finetune_options(o);
  BaseWeights base;
  if (!o.init_from.empty()) {
    base = describe_base_weights(o.init_from);
    if (!base_loaded) load(o.init_from);
  }
  adapt_for_finetune(model, o);
  return finetune_json(o, o.init_from.empty() ? nullptr : &base);
}

FineTuneOptions finetune_options_from(const Checkpoint& ck) {
  if (!ck.has_entry("finetune")) return {};
  return parse_entry(ck, "finetune", entry_from_json).options;
}

bool holds_trainable_only(const Checkpoint& ck) {
  return ck.has_entry("saved_parameters") && ck.entry("saved_parameters") == "trainable";
}

void restore_finetune_with(const Checkpoint& ck, Module& model, const LoadBaseWeights& load) {
  if (!ck.has_entry("finetune")) return;
  const Entry e = parse_entry(ck, "finetune", entry_from_json);
  if (holds_trainable_only(ck)) {
    if (e.options.init_from.empty()) {
      throw std::runtime_error("checkpoint '" + ck.path() + "' holds only trainable parameters but names no base");
    }
    require_same_base(ck.path(), e.base);
    GeneratorStateGuard keep_generator;
    load(e.base.path);
  }
  GeneratorStateGuard keep_generator;  // the adapters' draws are overwritten by the checkpoint's tensors
  adapt_for_finetune(model, e.options);
}

}  // namespace ag
