// Reading safetensors files: the header checked against itself and the file's size before
// anything is allocated, the index of a file's tensors (index_safetensors), and whole files
// into memory (parse_safetensors, load_safetensors). Writing is in safetensors.cpp.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "attograd/core/format.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/io/safetensors_checksums.h"

namespace ag {

namespace {

// Hugging Face's reader refuses larger headers; so do we, so that a corrupt length cannot make
// us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
// A tensor with elements takes at least one F32's bytes of the data section; an empty one takes
// none, and a file may hold this many of them besides.
constexpr uint64_t kSmallestElementBytes = 4;
constexpr uint64_t kMaxEmptyTensors = 4096;

// Non-negative JSON integers (nlohmann keeps them as uint64, exactly).
bool is_size(const Json& v) { return v.is_number_unsigned(); }

// One header entry, read and checked against itself; nothing is allocated yet.
struct HeaderEntry {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::F32;
  std::vector<int64_t> dims;
  uint64_t begin = 0, end = 0;
};

HeaderEntry parse_entry(const std::string& path, const std::string& name, const Json& info) {
  HeaderEntry entry;
  entry.name = name;
  const std::string where = "tensor '" + name + "': ";
  if (!info.is_object()) safetensors_corrupt(path, where + "header entry is " + json_type_name(info) + ", not an object");
  const auto dtype_it = info.find("dtype");
  const auto shape_it = info.find("shape");
  const auto offsets_it = info.find("data_offsets");
  if (dtype_it == info.end() || shape_it == info.end() || offsets_it == info.end()) {
    safetensors_corrupt(path, where + "header entry needs dtype, shape and data_offsets, got " + info.dump());
  }
  const Json* dtype = &*dtype_it;
  const Json* shape = &*shape_it;
  const Json* offsets = &*offsets_it;
  if (!dtype->is_string()) safetensors_corrupt(path, where + "dtype is " + json_type_name(*dtype) + ", not a string");
  const std::string& d = dtype->get_ref<const std::string&>();
  if (d == "F32") entry.dtype = SafetensorsDType::F32;
  else if (d == "F64") entry.dtype = SafetensorsDType::F64;
  else if (d == "I64") entry.dtype = SafetensorsDType::I64;
  else if (d == "F16") entry.dtype = SafetensorsDType::F16;
  else if (d == "BF16") entry.dtype = SafetensorsDType::BF16;
  else safetensors_corrupt(path, where + "unsupported dtype '" + d + "' (attograd reads F32, F64, F16, BF16 and I64)");

  if (!shape->is_array()) safetensors_corrupt(path, where + "shape " + shape->dump() + " is not an array");
  uint64_t numel = 1;
  for (const Json& dim : *shape) {
    if (!is_size(dim) || dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      safetensors_corrupt(path, where + "shape " + shape->dump() + " is not a list of sizes >= 0");
    }
    const uint64_t n = dim.get<uint64_t>();
    if (n != 0 && numel > std::numeric_limits<uint64_t>::max() / n) safetensors_corrupt(path, where + "shape " + shape->dump() + " is too large");
    numel *= n;
    entry.dims.push_back(static_cast<int64_t>(n));
  }
  if (!offsets->is_array() || offsets->size() != 2 || !is_size((*offsets)[0]) || !is_size((*offsets)[1]) ||
      (*offsets)[1].get<uint64_t>() < (*offsets)[0].get<uint64_t>()) {
    safetensors_corrupt(path, where + "data_offsets " + offsets->dump() + " is not a pair [begin, end] with 0 <= begin <= end");
  }
  entry.begin = (*offsets)[0].get<uint64_t>();
  entry.end = (*offsets)[1].get<uint64_t>();
  const uint64_t size = safetensors_element_size(entry.dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / size || numel * size != entry.end - entry.begin) {
    const std::string needed = numel > std::numeric_limits<uint64_t>::max() / size
                                   ? "more than 2^64"
                                   : std::to_string(numel * size);
    safetensors_corrupt(path, where + "shape " + Shape(entry.dims).str() + " of " + d + " needs " + needed + " bytes but data_offsets [" +
                      std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "] hold " +
                      std::to_string(entry.end - entry.begin));
  }
  return entry;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string bytes = read_file(path);
  return parse_safetensors(bytes, path);
}

namespace {

// The header of a safetensors file, checked against itself and against the file's size:
// `head` holds the file's first bytes, at least 8 + the header length when the file is that
// long. Nothing is allocated for a tensor until every entry has been found to fit the bytes the
// file holds.
struct Header {
  std::vector<HeaderEntry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
  std::string checksum_text;
  bool has_checksums = false;
  uint64_t data_start = 0;
};

// How many bytes of the file read_header needs: 8, then 8 + the header length (at most the file).
uint64_t header_bytes(std::string_view first8, uint64_t file_size) {
  if (first8.size() < 8) return 8;
  uint64_t header_len = 0;
  std::memcpy(&header_len, first8.data(), 8);
  return 8 + std::min({header_len, file_size - 8, kMaxHeaderBytes});
}

Header read_header(std::string_view bytes, uint64_t file_size, const std::string& path) {
  if (file_size == 0) safetensors_corrupt(path, "the file is empty (0 bytes)");
  if (file_size < 8) {
    safetensors_corrupt(path, "truncated header: the file has " + std::to_string(file_size) +
                      " bytes, fewer than the 8-byte header length");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > file_size - 8) {
    // A JSON document where a checkpoint was expected is a common slip (a tokenizer file from
    // train_bpe, a config): say so rather than only that the header is truncated.
    if (bytes[0] == '{') {
      safetensors_corrupt(path, "not a safetensors file: it starts like a JSON document (a tokenizer file written by "
                                "train_bpe?), while a safetensors file starts with its 8-byte header length");
    }
    safetensors_corrupt(path, "truncated header: the header length " + std::to_string(header_len) +
                      " is larger than the rest of the file (" + std::to_string(file_size - 8) + " bytes)");
  }
  if (header_len > kMaxHeaderBytes) {
    safetensors_corrupt(path, "header length " + std::to_string(header_len) + " exceeds the " +
                      std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  const std::string_view header_text(bytes.data() + 8, static_cast<size_t>(header_len));
  const uint64_t data_size = file_size - 8 - header_len;
  // The entries are counted before the document is built: a header may list no more tensors
  // than its data section can hold, so a small file cannot make us build millions of entries.
  Json header;
  try {
    const uint64_t listed = count_object_keys(header_text, kMetadataKey);
    const uint64_t holdable = data_size / kSmallestElementBytes + kMaxEmptyTensors;
    if (listed > holdable) {
      safetensors_corrupt(path, "the header lists " + std::to_string(listed) + " tensors, more than the " +
                        std::to_string(data_size) + "-byte data section can hold (at most " + std::to_string(holdable) +
                        ": one per " + std::to_string(kSmallestElementBytes) + " bytes, plus " +
                        std::to_string(kMaxEmptyTensors) + " empty ones)");
    }
    header = parse_json(header_text);
  } catch (const JsonError& e) {
    safetensors_corrupt(path, std::string("bad JSON in the header: ") + e.what());
  }
  if (!header.is_object()) safetensors_corrupt(path, std::string("the header is ") + json_type_name(header) + ", not an object");

  Header out;
  out.data_start = 8 + header_len;
  std::vector<HeaderEntry>& entries = out.entries;
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      if (!info.is_object()) safetensors_corrupt(path, "__metadata__ is " + std::string(json_type_name(info)) + ", not an object");
      // The parsed object is a sorted map, so every insertion goes at the end: linear in all.
      for (auto& [k, v] : header[kMetadataKey].items()) {
        if (!v.is_string()) safetensors_corrupt(path, "__metadata__ value for '" + k + "' is " + json_type_name(v) + ", not a string");
        if (k == kChecksumKey) {
          out.checksum_text = v.get<std::string>();
          out.has_checksums = true;
        } else {
          out.metadata.emplace_hint(out.metadata.end(), k, std::move(v.get_ref<std::string&>()));
        }
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, info));
  }

  // The ranges must tile the data section: sorted by start, each begins where the last ended.
  std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const HeaderEntry& r = entries[i];
    if (r.begin < covered) {
      safetensors_corrupt(path, "tensor '" + r.name + "' at data_offsets [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                        "] overlaps tensor '" + entries[i - 1].name + "' (which ends at " + std::to_string(covered) + ")");
    }
    if (r.begin > covered) {
      safetensors_corrupt(path, "bytes [" + std::to_string(covered) + ", " + std::to_string(r.begin) +
                        ") of the data section belong to no tensor (a hole before '" + r.name + "')");
    }
    if (r.end > data_size) {
      safetensors_corrupt(path, "data truncated: tensor '" + r.name + "' needs bytes [" + std::to_string(r.begin) + ", " +
                        std::to_string(r.end) + ") of the data section but only " + std::to_string(data_size) +
                        " bytes follow the header");
    }
    covered = r.end;
  }
  if (covered != data_size) {
    safetensors_corrupt(path, std::to_string(data_size - covered) + " bytes after the last tensor belong to no tensor (data section of " +
                      std::to_string(data_size) + " bytes, tensors cover " + std::to_string(covered) + ")");
  }
  return out;
}

}  // namespace

const SafetensorsTensorInfo* SafetensorsIndex::find(const std::string& name) const {
  for (const SafetensorsTensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

SafetensorsIndex index_safetensors(const FileReader& file) {
  const uint64_t size = file.size();
  std::string head(static_cast<size_t>(std::min<uint64_t>(size, 8)), '\0');
  file.read(0, head.data(), head.size());
  head.resize(static_cast<size_t>(std::min(size, header_bytes(head, size))));
  if (head.size() > 8) file.read(8, head.data() + 8, head.size() - 8);
  Header h = read_header(head, size, file.path());
  SafetensorsIndex index;
  index.data_start = h.data_start;
  index.metadata = std::move(h.metadata);
  if (h.has_checksums) {
    Checksums checksums = parse_checksums(file.path(), h.checksum_text);
    if (checksums.metadata) verify_metadata(file.path(), index.metadata, std::move(*checksums.metadata));
    index.checksums = std::move(checksums.tensors);
  }
  for (HeaderEntry& e : h.entries) {
    index.tensors.push_back({.name = std::move(e.name), .dtype = e.dtype, .shape = Shape(e.dims), .begin = e.begin,
                             .end = e.end});
  }
  return index;
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  // 1. The whole header (read_header).
  Header h = read_header(bytes, bytes.size(), path);
  SafetensorsFile file;
  file.metadata = std::move(h.metadata);
  const std::vector<HeaderEntry>& entries = h.entries;
  const std::string& checksum_text = h.checksum_text;
  const bool has_checksums = h.has_checksums;

  // 2. The checksums, when the writer stored them: the metadata's values (when the file is
  //    recent enough to have them), then the tensors' bytes as they are in the file.
  const char* data = bytes.data() + h.data_start;
  if (has_checksums) {
    Checksums checksums = parse_checksums(path, checksum_text);
    if (checksums.metadata) verify_metadata(path, file.metadata, std::move(*checksums.metadata));
    file.metadata_checksummed = checksums.metadata.has_value();
    std::map<std::string, uint32_t>& sums = checksums.tensors;
    for (const HeaderEntry& r : entries) {
      const auto it = sums.find(r.name);
      if (it == sums.end()) safetensors_corrupt(path, "tensor '" + r.name + "' has no checksum in __metadata__ '" + kChecksumKey + "'");
      const uint32_t actual = crc32c(data + r.begin, static_cast<size_t>(r.end - r.begin));
      if (actual != it->second) {
        safetensors_corrupt(path, "tensor '" + r.name + "' fails its CRC-32C check (stored " + hex32(it->second) + ", computed " +
                          hex32(actual) + "): its bytes were changed or moved after it was written");
      }
      sums.erase(it);
    }
    if (!sums.empty()) {
      safetensors_corrupt(path, "__metadata__ '" + std::string(kChecksumKey) + "' names tensor '" + sums.begin()->first +
                        "', which the header does not have");
    }
  }
  file.checksummed = has_checksums;

  // 3. Allocate and copy, in data order (the order the tensors were written in).
  file.entries.reserve(entries.size());
  for (const HeaderEntry& r : entries) {
    SafetensorsEntry e;
    e.name = r.name;
    e.dtype = r.dtype;
    const size_t n = static_cast<size_t>(r.end - r.begin);
    if (e.dtype == SafetensorsDType::I64) {
      e.indices.shape = Shape(r.dims);
      e.indices.data.resize(n / 8);
      if (n > 0) std::memcpy(e.indices.data.data(), data + r.begin, n);
    } else if (e.dtype == SafetensorsDType::F16 || e.dtype == SafetensorsDType::BF16) {
      // Widened to f32 as it is read: exact, every half value is a float value.
      e.tensor = Tensor(Shape(r.dims), DType::f32, "load_safetensors");
      float* out = e.tensor.data<float>();
      const auto widen = e.dtype == SafetensorsDType::F16 ? f16_to_float : bf16_to_float;
      for (size_t i = 0; i < n / 2; ++i) {
        uint16_t bits;
        std::memcpy(&bits, data + r.begin + 2 * i, 2);
        out[i] = widen(bits);
      }
    } else {
      e.tensor = Tensor(Shape(r.dims), e.dtype == SafetensorsDType::F32 ? DType::f32 : DType::f64, "load_safetensors");
      if (n > 0) std::memcpy(e.tensor.raw_data(), data + r.begin, n);
    }
    file.entries.push_back(std::move(e));
  }
  return file;
}

}  // namespace ag
