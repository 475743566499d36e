// Reading and writing safetensors files, the format PyTorch, NumPy and Hugging Face tools share:
//
//   bytes 0..8      N, the header length, unsigned 64-bit little-endian
//   bytes 8..8+N    a JSON object: for each tensor  "name": {"dtype": "F32", "shape": [2, 3],
//                   "data_offsets": [begin, end]}, plus an optional "__metadata__" object
//                   mapping strings to strings
//   bytes 8+N..     the data section: every tensor's raw little-endian bytes, row-major, at
//                   [begin, end) relative to the start of the data section
//
// attograd writes and reads F32 and F64 (Tensor) and I64 (Indices). The writer pads the header
// with spaces so that the data section starts 8-byte aligned, lays the tensors out back to back
// in the order given, and replaces the file atomically (train/atomic_file.h).
//
// The writer also stores a CRC-32C of every tensor's bytes in __metadata__ under "crc32c" (one
// JSON object, name -> 8 hex digits, as a string), and under its member "__metadata__" the
// CRC-32C of every other metadata value (key -> 8 hex digits): other readers see one more
// metadata string, ours verifies it, so a flipped bit in a tensor or in a saved setting, or two
// swapped tensors of one size, are reported by name. Files written before the metadata was
// checksummed lack that member and load with their tensors verified and their metadata as is.
//
// The reader trusts nothing: it reads regular files only, checks the header length against the
// file size, counts the header's entries before it builds anything (no more than the data section
// can hold: one per 4 bytes, the smallest element, plus 4096 empty tensors), parses the JSON
// strictly (linear in its size whatever the entries' shape, duplicate keys refused), and requires
// each entry's shape to match its byte range, the ranges to stay inside the data section and to
// cover it exactly once without overlap, and every checksum (when there are any) to match, all
// before it allocates a tensor. Every problem is a std::runtime_error that starts with
// "safetensors '<path>': " and says what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/core/tensor.h"
#include "attograd/train/io/atomic_file.h"

namespace ag {

// F16 and BF16 (half precision, as Hugging Face ships many models) are read: a file's tensor in
// either becomes an f32 Tensor as it is loaded (exactly: every half value is a float value), and
// the families' imports widen them as they read (models/gpt/gpt_weights.h). Both are written
// too: an entry of either dtype holds an f32 tensor, rounded to the nearest half (ties to even)
// as the file is written, so a half file read and saved again is byte for byte the same, and an
// export can halve a model's file (SafetensorsFile::add_bf16).
enum class SafetensorsDType { F32, F64, I64, F16, BF16 };
const char* safetensors_dtype_name(SafetensorsDType dtype);  // "F32", "F64", "I64", "F16", "BF16"
// Bytes of one element: 2 for F16 and BF16, 4 for F32, 8 for F64 and I64.
size_t safetensors_element_size(SafetensorsDType dtype);
// One half-precision value (its bits, little-endian as stored) as a float, exactly.
float f16_to_float(uint16_t bits);
float bf16_to_float(uint16_t bits);
// The bfloat16 or IEEE half nearest to x, as its bits: ties to even, overflow to infinity,
// infinities stay, a NaN stays a NaN with its sign and the top of its payload.
uint16_t float_to_bf16(float x);
uint16_t float_to_f16(float x);

// A stored half value as the weight readers template over the stored types: its bits, widened
// exactly by an explicit conversion (the families' imports, models/*/).
struct StoredF16 {
  uint16_t bits;
  explicit operator float() const { return f16_to_float(bits); }
  explicit operator double() const { return f16_to_float(bits); }
};
struct StoredBF16 {
  uint16_t bits;
  explicit operator float() const { return bf16_to_float(bits); }
  explicit operator double() const { return bf16_to_float(bits); }
};
// Calls f with a value of the C++ type a floating dtype is stored as: float (F32), double (F64),
// StoredF16 or StoredBF16. std::logic_error for I64, which a reader refuses before it gets here.
template <typename F>
void with_stored_type(SafetensorsDType dtype, F&& f) {
  switch (dtype) {
    case SafetensorsDType::F32: f(float{}); return;
    case SafetensorsDType::F64: f(double{}); return;
    case SafetensorsDType::F16: f(StoredF16{}); return;
    case SafetensorsDType::BF16: f(StoredBF16{}); return;
    case SafetensorsDType::I64: break;
  }
  throw std::logic_error("with_stored_type: an I64 tensor where floats were expected");
}

// One named tensor. Floating data lives in `tensor`, integer data in `indices`; the other is
// left empty.
struct SafetensorsEntry {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::F32;
  Tensor tensor;
  Indices indices;

  Shape shape() const { return dtype == SafetensorsDType::I64 ? indices.shape : tensor.shape(); }
};

struct SafetensorsFile {
  std::vector<SafetensorsEntry> entries;  // in data-section order
  std::map<std::string, std::string> metadata;  // without the reserved "crc32c" entry
  bool checksummed = false;                     // set by the reader: the file carried checksums
  bool metadata_checksummed = false;            // ... and among them the metadata values' ones

  // Appends an entry. Throws std::invalid_argument for an empty, reserved ("__metadata__") or
  // repeated name, or an undefined tensor.
  void add(const std::string& name, const Tensor& tensor);
  void add(const std::string& name, const Indices& indices);
  // An f32 tensor to be stored as BF16 (rounded as float_to_bf16 when the file is written).
  void add_bf16(const std::string& name, const Tensor& tensor);

  const SafetensorsEntry* find(const std::string& name) const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
};

// Writes `file` to `path` atomically; std::runtime_error naming the path on any I/O failure
// (the previous file at `path`, if any, is then unchanged).
void save_safetensors(const std::string& path, const SafetensorsFile& file);

// Reads and validates a whole file (see the list above). Only a regular file is read (a FIFO,
// a device or a directory is refused before any byte is read), and its size is known first.
SafetensorsFile load_safetensors(const std::string& path);

// The same checks on bytes already in memory; `name` stands for the path in messages. The whole
// header is validated against `bytes.size()` before any tensor is allocated.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& name);

// The header of a safetensors file without its data, for readers that copy each tensor
// straight to where it belongs (models/gpt/gpt_weights.h): every tensor's name, dtype, shape and
// byte range [begin, end) counted from data_start, checked exactly as load_safetensors checks
// them (types, shapes against ranges, ranges tiling the data section), and the metadata with
// its checksums verified. The tensors' checksums are returned for the caller to verify on the
// bytes it reads. Reads only the header's bytes.
struct SafetensorsTensorInfo {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::F32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct SafetensorsIndex {
  std::vector<SafetensorsTensorInfo> tensors;  // in data order
  std::map<std::string, std::string> metadata;  // without the reserved "crc32c" entry
  std::map<std::string, uint32_t> checksums;    // tensor name -> CRC-32C; empty when the file has none
  uint64_t data_start = 0;                      // the data section's offset in the file

  const SafetensorsTensorInfo* find(const std::string& name) const;
};

SafetensorsIndex index_safetensors(const FileReader& file);

}  // namespace ag
