#include "attograd/train/io/safetensors_checksums.h"

#include <charconv>
#include <cstdio>
#include <stdexcept>

#include "attograd/train/io/crc32c.h"

namespace ag {

void safetensors_corrupt(const std::string& path, const std::string& what) {
  throw std::runtime_error("safetensors '" + path + "': " + what);
}

std::string hex32(uint32_t v) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", v);
  return text;
}

OrderedJson metadata_checksums(const std::map<std::string, std::string>& metadata) {
  OrderedJson sums = OrderedJson::object();
  for (const auto& [key, value] : metadata) sums[key] = hex32(crc32c(value.data(), value.size()));
  return sums;
}

Checksums parse_checksums(const std::string& path, const std::string& text) {
  const auto bad = [&](const std::string& what) {
    safetensors_corrupt(path, std::string("__metadata__ '") + kChecksumKey + "' " + what);
  };
  // name -> 8 hex digits, for `what` ("tensor", "metadata key").
  const auto sums_of = [&](const Json& j, const char* what) {
    std::map<std::string, uint32_t> sums;
    for (const auto& [name, v] : j.items()) {
      const std::string digits = v.is_string() ? v.get<std::string>() : "";
      uint32_t value = 0;
      const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
      if (digits.size() != 8 || ec != std::errc() || ptr != digits.data() + digits.size()) {
        bad("gives " + std::string(what) + " '" + name + "' the checksum " + v.dump() + ", not 8 hex digits");
      }
      sums.emplace_hint(sums.end(), name, value);
    }
    return sums;
  };
  Json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    bad(std::string("is not JSON: ") + e.what());
  }
  if (!j.is_object()) bad("is not a JSON object");
  Checksums sums;
  if (const auto meta = j.find(kMetadataKey); meta != j.end()) {
    if (!meta->is_object()) bad(std::string("has ") + json_type_name(*meta) + " under '" + kMetadataKey + "', not an object");
    sums.metadata = sums_of(*meta, "metadata key");
    j.erase(meta);
  }
  sums.tensors = sums_of(j, "tensor");
  return sums;
}

void verify_metadata(const std::string& path, const std::map<std::string, std::string>& metadata,
                     std::map<std::string, uint32_t> sums) {
  for (const auto& [key, value] : metadata) {
    const auto it = sums.find(key);
    if (it == sums.end()) {
      safetensors_corrupt(path, "__metadata__ '" + key + "' has no checksum in __metadata__ '" + kChecksumKey +
                        "' (a key was added or renamed after the file was written)");
    }
    const uint32_t actual = crc32c(value.data(), value.size());
    if (actual != it->second) {
      safetensors_corrupt(path, "__metadata__ '" + key + "' fails its CRC-32C check (stored " + hex32(it->second) + ", computed " +
                        hex32(actual) + "): its value was changed after the file was written");
    }
    sums.erase(it);
  }
  if (!sums.empty()) {
    safetensors_corrupt(path, "__metadata__ '" + std::string(kChecksumKey) + "' has a checksum for the metadata key '" +
                      sums.begin()->first + "', which __metadata__ does not have");
  }
}

}  // namespace ag
