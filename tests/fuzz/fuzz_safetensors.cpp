// libFuzzer target: ag::parse_safetensors on arbitrary bytes (docs/fuzzing.md).
//
// The reader promises (train/io/safetensors.h) that bad input is an exception, never a crash, an
// out-of-bounds read, a leak or an allocation sized by an unchecked header field. Any
// std::exception is therefore an expected outcome. What the input is accepted as is checked
// too, because a reader can fail quietly as well as loudly:
//   * every entry holds exactly shape.numel() elements of its dtype, in the right member;
//   * saving the parsed file and loading it back gives the same names, dtypes, shapes, bytes
//     and metadata (the writer can write everything the reader accepts, and the two agree).
// A broken invariant aborts with "fuzz finding: ...", which libFuzzer records like a crash.
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "attograd/train/io/safetensors.h"
#include "fuzz_support.h"

namespace {

using ag::SafetensorsDType;
using ag::SafetensorsEntry;
using ag::SafetensorsFile;

// The entry's data as bytes (row-major, contiguous), after checking that it is where the dtype
// says and has the shape's element count.
std::string_view checked_bytes(const SafetensorsEntry& e) {
  const std::string who = "entry '" + e.name + "' (" + ag::safetensors_dtype_name(e.dtype) + ")";
  if (e.dtype == SafetensorsDType::I64) {
    if (e.tensor.defined()) ag::fuzz::finding(who + " also has a floating tensor");
    if (e.indices.numel() != e.indices.shape.numel()) {
      ag::fuzz::finding(who + ": " + std::to_string(e.indices.numel()) + " values for shape " + e.indices.shape.str());
    }
    return {reinterpret_cast<const char*>(e.indices.data.data()), e.indices.data.size() * sizeof(int64_t)};
  }
  // F16 and BF16 entries hold their values widened to f32.
  const ag::DType expected = e.dtype == SafetensorsDType::F64 ? ag::DType::f64 : ag::DType::f32;
  if (!e.tensor.defined()) ag::fuzz::finding(who + " has no tensor");
  if (e.tensor.dtype() != expected) ag::fuzz::finding(who + " holds a tensor of dtype " + ag::dtype_name(e.tensor.dtype()));
  if (!e.tensor.is_contiguous()) ag::fuzz::finding(who + " holds a non-contiguous tensor");
  if (!e.indices.data.empty()) ag::fuzz::finding(who + " also has integer data");
  const size_t n = static_cast<size_t>(e.tensor.numel()) * ag::dtype_size(expected);
  return {static_cast<const char*>(e.tensor.raw_data()), n};
}

void check_round_trip(const SafetensorsFile& parsed) {
  const std::string& path = ag::fuzz::scratch_path("safetensors");
  SafetensorsFile reread;
  try {
    ag::save_safetensors(path, parsed);
    reread = ag::load_safetensors(path);
  } catch (const std::exception& e) {
    ag::fuzz::finding(std::string("an accepted file does not survive save and load: ") + e.what());
  }
  if (reread.entries.size() != parsed.entries.size()) {
    ag::fuzz::finding("round trip: " + std::to_string(parsed.entries.size()) + " entries became " +
                      std::to_string(reread.entries.size()));
  }
  for (size_t i = 0; i < parsed.entries.size(); ++i) {
    const SafetensorsEntry& a = parsed.entries[i];
    const SafetensorsEntry& b = reread.entries[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape() != b.shape() || checked_bytes(a) != checked_bytes(b)) {
      ag::fuzz::finding("round trip changed entry " + std::to_string(i) + " '" + a.name + "' " + a.shape().str() +
                        " into '" + b.name + "' " + b.shape().str());
    }
  }
  if (reread.metadata != parsed.metadata) ag::fuzz::finding("round trip changed the metadata");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  SafetensorsFile file;
  try {
    file = ag::parse_safetensors(bytes, "fuzz input");
  } catch (const std::exception&) {
    return 0;  // rejected, as it should be for almost every input
  }
  for (const SafetensorsEntry& e : file.entries) checked_bytes(e);
  check_round_trip(file);
  return 0;
}
