#include "train/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "train/atomic_file.h"
#include "train/json.h"

namespace ag {

// The data section is copied byte for byte into and out of memory.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

// Hugging Face's reader refuses larger headers; so do we, so that a corrupt length cannot make
// us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
constexpr const char* kMetadataKey = "__metadata__";

size_t element_size(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::F32: return 4;
    case SafetensorsDType::F64: return 8;
    case SafetensorsDType::I64: return 8;
  }
  return 0;
}

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw std::runtime_error("safetensors '" + path + "': " + what);
}

void check_new_name(const SafetensorsFile& file, const std::string& name) {
  if (name.empty()) throw std::invalid_argument("SafetensorsFile::add: empty tensor name");
  if (name == kMetadataKey) throw std::invalid_argument("SafetensorsFile::add: the name __metadata__ is reserved");
  if (file.contains(name)) throw std::invalid_argument("SafetensorsFile::add: duplicate tensor name '" + name + "'");
}

Json shape_json(const Shape& shape) {
  Json::Array dims;
  for (int64_t d : shape) dims.emplace_back(d);
  return Json::array(std::move(dims));
}

// Reads one header entry into `entry` (everything but the data) and returns its byte range.
std::pair<uint64_t, uint64_t> parse_entry(const std::string& path, const std::string& name, const Json& info,
                                          SafetensorsEntry& entry) {
  const std::string where = "tensor '" + name + "': ";
  if (!info.is_object()) corrupt(path, where + "header entry is " + json_type_name(info.type()) + ", not an object");
  const Json* dtype = info.find("dtype");
  const Json* shape = info.find("shape");
  const Json* offsets = info.find("data_offsets");
  if (dtype == nullptr || shape == nullptr || offsets == nullptr) {
    corrupt(path, where + "header entry needs dtype, shape and data_offsets, got " + info.dump());
  }
  if (!dtype->is_string()) corrupt(path, where + "dtype is " + json_type_name(dtype->type()) + ", not a string");
  const std::string& d = dtype->as_string();
  if (d == "F32") entry.dtype = SafetensorsDType::F32;
  else if (d == "F64") entry.dtype = SafetensorsDType::F64;
  else if (d == "I64") entry.dtype = SafetensorsDType::I64;
  else corrupt(path, where + "unsupported dtype '" + d + "' (attograd reads F32, F64 and I64)");

  if (!shape->is_array()) corrupt(path, where + "shape " + shape->dump() + " is not an array");
  std::vector<int64_t> dims;
  uint64_t numel = 1;
  for (const Json& dim : shape->as_array()) {
    if (!dim.is_integer() || dim.as_int() < 0) corrupt(path, where + "shape " + shape->dump() + " is not a list of sizes >= 0");
    const uint64_t n = static_cast<uint64_t>(dim.as_int());
    if (n != 0 && numel > std::numeric_limits<uint64_t>::max() / n) corrupt(path, where + "shape " + shape->dump() + " is too large");
    numel *= n;
    dims.push_back(dim.as_int());
  }
  if (!offsets->is_array() || offsets->size() != 2 || !offsets->at(0).is_integer() || !offsets->at(1).is_integer() ||
      offsets->at(0).as_int() < 0 || offsets->at(1).as_int() < offsets->at(0).as_int()) {
    corrupt(path, where + "data_offsets " + offsets->dump() + " is not a pair [begin, end] with 0 <= begin <= end");
  }
  const uint64_t begin = static_cast<uint64_t>(offsets->at(0).as_int());
  const uint64_t end = static_cast<uint64_t>(offsets->at(1).as_int());
  const uint64_t size = element_size(entry.dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / size || numel * size != end - begin) {
    const std::string needed = numel > std::numeric_limits<uint64_t>::max() / size
                                   ? "more than 2^64"
                                   : std::to_string(numel * size);
    corrupt(path, where + "shape " + Shape(dims).str() + " of " + d + " needs " + needed + " bytes but data_offsets [" +
                      std::to_string(begin) + ", " + std::to_string(end) + "] hold " + std::to_string(end - begin));
  }
  entry.name = name;
  if (entry.dtype == SafetensorsDType::I64) entry.indices.shape = Shape(dims);
  else entry.tensor = Tensor(Shape(dims), entry.dtype == SafetensorsDType::F32 ? DType::f32 : DType::f64);
  return {begin, end};
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::F32: return "F32";
    case SafetensorsDType::F64: return "F64";
    case SafetensorsDType::I64: return "I64";
  }
  return "?";
}

void SafetensorsFile::add(const std::string& name, const Tensor& tensor) {
  check_new_name(*this, name);
  if (!tensor.defined()) throw std::invalid_argument("SafetensorsFile::add: tensor '" + name + "' is undefined");
  SafetensorsEntry e;
  e.name = name;
  e.dtype = tensor.dtype() == DType::f32 ? SafetensorsDType::F32 : SafetensorsDType::F64;
  e.tensor = tensor;
  entries.push_back(std::move(e));
}

void SafetensorsFile::add(const std::string& name, const Indices& indices) {
  check_new_name(*this, name);
  if (indices.shape.numel() != indices.numel()) {
    throw std::invalid_argument("SafetensorsFile::add: indices '" + name + "' of shape " + indices.shape.str() +
                                " hold " + std::to_string(indices.numel()) + " values");
  }
  SafetensorsEntry e;
  e.name = name;
  e.dtype = SafetensorsDType::I64;
  e.indices = indices;
  entries.push_back(std::move(e));
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void save_safetensors(const std::string& path, const SafetensorsFile& file) {
  // Contiguous copies where needed, so each entry is one block of bytes.
  std::vector<Tensor> blocks(file.entries.size());
  Json::Object header;
  if (!file.metadata.empty()) {
    Json::Object meta;
    for (const auto& [k, v] : file.metadata) meta.emplace_back(k, Json(v));
    header.emplace_back(kMetadataKey, Json::object(std::move(meta)));
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < file.entries.size(); ++i) {
    const SafetensorsEntry& e = file.entries[i];
    uint64_t bytes = 0;
    if (e.dtype == SafetensorsDType::I64) {
      bytes = static_cast<uint64_t>(e.indices.numel()) * 8;
    } else {
      if (!e.tensor.defined()) throw std::invalid_argument("save_safetensors: tensor '" + e.name + "' is undefined");
      const SafetensorsDType want = e.tensor.dtype() == DType::f32 ? SafetensorsDType::F32 : SafetensorsDType::F64;
      if (want != e.dtype) {
        throw std::invalid_argument("save_safetensors: tensor '" + e.name + "' is " + dtype_name(e.tensor.dtype()) +
                                    " but its entry says " + safetensors_dtype_name(e.dtype));
      }
      blocks[i] = e.tensor.contiguous();
      bytes = static_cast<uint64_t>(blocks[i].numel()) * element_size(e.dtype);
    }
    Json::Object info;
    info.emplace_back("dtype", Json(safetensors_dtype_name(e.dtype)));
    info.emplace_back("shape", shape_json(e.shape()));
    info.emplace_back("data_offsets", Json::array({Json(offset), Json(offset + bytes)}));
    header.emplace_back(e.name, Json::object(std::move(info)));  // rejects duplicate names
    offset += bytes;
  }
  std::string text = Json::object(std::move(header)).dump();
  // Spaces are JSON whitespace: padding keeps every reader happy and aligns the data section.
  while ((8 + text.size()) % 8 != 0) text += ' ';
  const uint64_t header_len = text.size();
  char len_bytes[8];
  std::memcpy(len_bytes, &header_len, 8);

  AtomicFile out(path);
  out.write(len_bytes, 8);
  out.write(text);
  for (size_t i = 0; i < file.entries.size(); ++i) {
    const SafetensorsEntry& e = file.entries[i];
    if (e.dtype == SafetensorsDType::I64) {
      out.write(e.indices.data.data(), e.indices.data.size() * sizeof(int64_t));
    } else {
      out.write(blocks[i].raw_data(), static_cast<size_t>(blocks[i].numel()) * element_size(e.dtype));
    }
  }
  out.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string bytes = read_file(path);
  const uint64_t file_size = bytes.size();
  if (file_size == 0) corrupt(path, "the file is empty (0 bytes)");
  if (file_size < 8) {
    corrupt(path, "truncated header: the file has " + std::to_string(file_size) +
                      " bytes, fewer than the 8-byte header length");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > file_size - 8) {
    corrupt(path, "truncated header: the header length " + std::to_string(header_len) +
                      " is larger than the rest of the file (" + std::to_string(file_size - 8) + " bytes)");
  }
  if (header_len > kMaxHeaderBytes) {
    corrupt(path, "header length " + std::to_string(header_len) + " exceeds the " +
                      std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  const std::string_view header_text(bytes.data() + 8, static_cast<size_t>(header_len));
  Json header;
  try {
    header = Json::parse(header_text);
  } catch (const JsonError& e) {
    corrupt(path, std::string("bad JSON in the header: ") + e.what());
  }
  if (!header.is_object()) corrupt(path, std::string("the header is ") + json_type_name(header.type()) + ", not an object");

  SafetensorsFile file;
  struct Range {
    uint64_t begin, end;
    size_t entry;
  };
  std::vector<Range> ranges;
  for (const auto& [name, info] : header.as_object()) {
    if (name == kMetadataKey) {
      if (!info.is_object()) corrupt(path, "__metadata__ is " + std::string(json_type_name(info.type())) + ", not an object");
      for (const auto& [k, v] : info.as_object()) {
        if (!v.is_string()) corrupt(path, "__metadata__ value for '" + k + "' is " + json_type_name(v.type()) + ", not a string");
        file.metadata[k] = v.as_string();
      }
      continue;
    }
    SafetensorsEntry entry;
    const auto [begin, end] = parse_entry(path, name, info, entry);
    ranges.push_back({begin, end, file.entries.size()});
    file.entries.push_back(std::move(entry));
  }

  // The ranges must tile the data section: sorted by start, each begins where the last ended.
  const uint64_t data_size = file_size - 8 - header_len;
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    const std::string& name = file.entries[r.entry].name;
    if (r.begin < covered) {
      corrupt(path, "tensor '" + name + "' at data_offsets [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                        "] overlaps tensor '" + file.entries[ranges[i - 1].entry].name + "' (which ends at " +
                        std::to_string(covered) + ")");
    }
    if (r.begin > covered) {
      corrupt(path, "bytes [" + std::to_string(covered) + ", " + std::to_string(r.begin) +
                        ") of the data section belong to no tensor (a hole before '" + name + "')");
    }
    if (r.end > data_size) {
      corrupt(path, "data truncated: tensor '" + name + "' needs bytes [" + std::to_string(r.begin) + ", " +
                        std::to_string(r.end) + ") of the data section but only " + std::to_string(data_size) +
                        " bytes follow the header");
    }
    covered = r.end;
  }
  if (covered != data_size) {
    corrupt(path, std::to_string(data_size - covered) + " bytes after the last tensor belong to no tensor (data section of " +
                      std::to_string(data_size) + " bytes, tensors cover " + std::to_string(covered) + ")");
  }

  const char* data = bytes.data() + 8 + header_len;
  for (const Range& r : ranges) {
    SafetensorsEntry& e = file.entries[r.entry];
    const size_t n = static_cast<size_t>(r.end - r.begin);
    if (n == 0) continue;
    if (e.dtype == SafetensorsDType::I64) {
      e.indices.data.resize(n / 8);
      std::memcpy(e.indices.data.data(), data + r.begin, n);
    } else {
      std::memcpy(e.tensor.raw_data(), data + r.begin, n);
    }
  }
  // Hand the entries back in data order, the order they were written in.
  std::vector<SafetensorsEntry> ordered;
  ordered.reserve(ranges.size());
  for (const Range& r : ranges) ordered.push_back(std::move(file.entries[r.entry]));
  file.entries = std::move(ordered);
  return file;
}

}  // namespace ag
