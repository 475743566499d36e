// The CRC-32C checksums attograd's safetensors writer keeps in the file's __metadata__, and
// their reading and checking (train/io/safetensors.cpp does the file format itself). Internal to
// the library, not installed.
//
// The checksums are one metadata string under kChecksumKey, a JSON object:
//   "<tensor name>": "<8 hex digits>"        the CRC-32C of the tensor's bytes, for every tensor
//   "__metadata__": {"<key>": "<8 hex>"}     the CRC-32C of the value of every other metadata key
// "__metadata__" is a name no tensor can have. Files written before the metadata was checksummed
// have no "__metadata__" member: their tensors are verified and their metadata is read as it
// is (a bit flipped in it cannot remove the member: it would rename it, which is refused).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "attograd/train/io/json_text.h"

namespace ag {

inline constexpr const char* kMetadataKey = "__metadata__";
// The __metadata__ key under which the writer stores the checksums.
inline constexpr const char* kChecksumKey = "crc32c";

// std::runtime_error "safetensors '<path>': <what>": how every corrupt file is reported.
[[noreturn]] void safetensors_corrupt(const std::string& path, const std::string& what);

// A checksum as the file writes it: 8 lowercase hex digits.
std::string hex32(uint32_t v);

struct Checksums {
  std::map<std::string, uint32_t> tensors;
  std::optional<std::map<std::string, uint32_t>> metadata;  // none in files from before it existed
};

// The metadata checksums the writer stores: every key but kChecksumKey, in key order.
OrderedJson metadata_checksums(const std::map<std::string, std::string>& metadata);
// The kChecksumKey string of the file at `path`, parsed; safetensors_corrupt() naming what is malformed.
Checksums parse_checksums(const std::string& path, const std::string& text);
// Every metadata value against its stored checksum; every key has one and every checksum a key.
void verify_metadata(const std::string& path, const std::map<std::string, std::string>& metadata,
                     std::map<std::string, uint32_t> sums);

}  // namespace ag
