// Safetensors files in memory (SafetensorsFile) and written to disk, with a CRC-32C per tensor and
// per metadata value; reading them back is safetensors_read.cpp.
#include "attograd/train/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>
#include <unordered_set>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/safetensors_checksums.h"

namespace ag {

// The data section is copied byte for byte into and out of memory.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

void check_new_name(const SafetensorsFile& file, const std::string& name) {
  if (name.empty()) throw std::invalid_argument("SafetensorsFile::add: empty tensor name");
  if (name == kMetadataKey) throw std::invalid_argument("SafetensorsFile::add: the name __metadata__ is reserved");
  if (file.contains(name)) throw std::invalid_argument("SafetensorsFile::add: duplicate tensor name '" + name + "'");
}

OrderedJson shape_json(const Shape& shape) {
  OrderedJson dims = OrderedJson::array();
  for (int64_t d : shape) dims.push_back(d);
  return dims;
}

}  // namespace

constexpr Named<SafetensorsDType> kDTypeNames[] = {{SafetensorsDType::F32, "F32"},
                                                   {SafetensorsDType::F64, "F64"},
                                                   {SafetensorsDType::I64, "I64"},
                                                   {SafetensorsDType::F16, "F16"},
                                                   {SafetensorsDType::BF16, "BF16"}};

const char* safetensors_dtype_name(SafetensorsDType dtype) { return name_of(kDTypeNames, dtype); }

size_t safetensors_element_size(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::F16:
    case SafetensorsDType::BF16: return 2;
    case SafetensorsDType::F32: return 4;
    case SafetensorsDType::F64:
    case SafetensorsDType::I64: return 8;
  }
  return 8;
}

float f16_to_float(uint16_t bits) {
  // IEEE 754 binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  uint32_t out = 0;
  if (exponent == 0x1F) {
    out = sign | 0x7F800000u | (mantissa << 13);  // infinity or NaN
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);  // normal: rebias 15 -> 127
  } else if (mantissa == 0) {
    out = sign;  // zero
  } else {
    // Subnormal: shift the mantissa up until its leading 1 is the implicit bit.
    int e = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    out = sign | (static_cast<uint32_t>(e) << 23) | ((mantissa & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &out, sizeof f);
  return f;
}

float bf16_to_float(uint16_t bits) {
  // bfloat16 is the top half of a float32.
  const uint32_t out = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &out, sizeof f);
  return f;
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

void SafetensorsFile::add_bf16(const std::string& name, const Tensor& tensor) {
  add(name, tensor);
  if (tensor.dtype() != DType::f32) {
    entries.pop_back();
    throw std::invalid_argument("SafetensorsFile::add_bf16: tensor '" + name + "' is " + dtype_name(tensor.dtype()) +
                                "; BF16 is written from f32 only");
  }
  entries.back().dtype = SafetensorsDType::BF16;
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

uint16_t float_to_bf16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    // A NaN keeps its sign and the top of its payload, so a BF16 file read and written back is
    // unchanged; a payload that lived only in the dropped bits becomes the quiet bit.
    const uint16_t top = static_cast<uint16_t>(bits >> 16);
    return (top & 0x007fu) != 0 ? top : static_cast<uint16_t>(top | 0x0040u);
  }
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t float_to_f16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, 4);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // infinity or NaN; a NaN keeps the top of its payload
    if (magnitude == 0x7f800000u) return sign | 0x7c00u;
    const auto payload = static_cast<uint16_t>((magnitude >> 13) & 0x3ffu);
    return sign | 0x7c00u | (payload != 0 ? payload : 0x0200u);
  }
  // 65520 is halfway between the largest half, 65504, and 65536; the tie goes to the even side,
  // which is infinity.
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;
  // The value's significand with its implicit bit, and how far right it moves to land in the
  // half's 10 bits: by 13 for a normal half; for a subnormal one (unit 2^-24) by 126 - exponent.
  const uint32_t exponent = magnitude >> 23;
  uint32_t significand = (magnitude & 0x007fffffu) | 0x00800000u;
  uint32_t shift = 13;
  uint32_t half_exponent = 0;
  if (exponent >= 113) {  // 2^-14 and up: a normal half
    half_exponent = exponent - 112;
    significand &= 0x007fffffu;  // the half keeps the implicit bit implicit too
  } else {
    if (exponent < 102) return sign;  // below 2^-25 (and zero): rounds to a signed zero
    shift = 126 - exponent;          // 14 ... 24
  }
  uint32_t half = (half_exponent << 10) | (significand >> shift);
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rest > halfway || (rest == halfway && (half & 1u) != 0)) ++half;  // a carry moves up the exponent
  return static_cast<uint16_t>(sign | half);
}

namespace {

// A contiguous f32 tensor as the bits of the half type `dtype` (F16 or BF16).
std::vector<uint16_t> half_bits(const Tensor& contiguous_f32, SafetensorsDType dtype) {
  std::vector<uint16_t> out(static_cast<size_t>(contiguous_f32.numel()));
  const float* p = contiguous_f32.data<float>();
  const auto narrow = dtype == SafetensorsDType::F16 ? float_to_f16 : float_to_bf16;
  for (size_t i = 0; i < out.size(); ++i) out[i] = narrow(p[i]);
  return out;
}

bool is_half(SafetensorsDType dtype) { return dtype == SafetensorsDType::F16 || dtype == SafetensorsDType::BF16; }

}  // namespace

void save_safetensors(const std::string& path, const SafetensorsFile& file) {
  // Contiguous copies where needed, so each entry is one block of bytes.
  std::vector<Tensor> blocks(file.entries.size());
  OrderedJson header = OrderedJson::object();
  std::unordered_set<std::string_view> names;  // the entries vector is public: check it here
  if (file.metadata.count(kChecksumKey)) {
    throw std::invalid_argument(std::string("save_safetensors: the metadata key '") + kChecksumKey +
                                "' is written by the writer itself");
  }
  uint64_t offset = 0;
  OrderedJson checksums = OrderedJson::object();
  for (size_t i = 0; i < file.entries.size(); ++i) {
    const SafetensorsEntry& e = file.entries[i];
    uint64_t bytes = 0;
    if (e.dtype == SafetensorsDType::I64) {
      bytes = static_cast<uint64_t>(e.indices.numel()) * 8;
      checksums[e.name] = hex32(crc32c(e.indices.data.data(), static_cast<size_t>(bytes)));
    } else {
      if (!e.tensor.defined()) throw std::invalid_argument("save_safetensors: tensor '" + e.name + "' is undefined");
      const SafetensorsDType want = e.tensor.dtype() == DType::f32 ? SafetensorsDType::F32 : SafetensorsDType::F64;
      if (is_half(e.dtype) && want == SafetensorsDType::F32) {
        // Converted twice (here for the checksum, again when written) rather than held: a
        // model's half copy would be half its size again in memory.
        blocks[i] = e.tensor.contiguous();
        const std::vector<uint16_t> half = half_bits(blocks[i], e.dtype);
        bytes = static_cast<uint64_t>(half.size()) * 2;
        checksums[e.name] = hex32(crc32c(half.data(), static_cast<size_t>(bytes)));
      } else if (want != e.dtype) {
        throw std::invalid_argument("save_safetensors: tensor '" + e.name + "' is " + dtype_name(e.tensor.dtype()) +
                                    " but its entry says " + safetensors_dtype_name(e.dtype));
      } else {
        blocks[i] = e.tensor.contiguous();
        bytes = static_cast<uint64_t>(blocks[i].numel()) * safetensors_element_size(e.dtype);
        checksums[e.name] = hex32(crc32c(blocks[i].raw_data(), static_cast<size_t>(bytes)));
      }
    }
    if (e.name.empty() || e.name == kMetadataKey || !names.insert(e.name).second) {
      throw std::invalid_argument("save_safetensors: tensor name '" + e.name + "' is empty, reserved or repeated");
    }
    header[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)},
                      {"shape", shape_json(e.shape())},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  // __metadata__ goes first, as other writers put it; the checksums are one more string in it.
  checksums[kMetadataKey] = metadata_checksums(file.metadata);
  OrderedJson meta = OrderedJson::object();
  for (const auto& [k, v] : file.metadata) meta[k] = v;
  meta[kChecksumKey] = checksums.dump();
  OrderedJson document = {{kMetadataKey, std::move(meta)}};
  for (auto& [name, info] : header.items()) document[name] = std::move(info);
  std::string text = document.dump();
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
    } else if (is_half(e.dtype)) {
      const std::vector<uint16_t> half = half_bits(blocks[i], e.dtype);
      out.write(half.data(), half.size() * 2);
    } else {
      out.write(blocks[i].raw_data(), static_cast<size_t>(blocks[i].numel()) * safetensors_element_size(e.dtype));
    }
  }
  out.commit();
}

}  // namespace ag
