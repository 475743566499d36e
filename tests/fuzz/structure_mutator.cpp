// A safetensors-aware mutator, linked into both targets (libFuzzer calls it instead of its own
// mutations when it is defined).
//
// Plain byte mutations of a safetensors file nearly always break the 8-byte header length (any
// insertion or deletion in the header does), so the reader refuses the input at its first
// check and the fuzzer learns little beyond it. Most of the time this mutates the header text
// alone and rewrites the length to match, or the data section alone (the header, and so the
// length, untouched); one time in eight it leaves the whole input to libFuzzer's mutations, so
// the length field and arbitrary bytes are fuzzed too.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  const unsigned choice = rng() % 8;
  uint64_t header_len = 0;  // little-endian, as the format says (and as this x86-64 host stores it)
  if (size >= 8) std::memcpy(&header_len, data, 8);
  const bool framed = size >= 8 && header_len > 0 && header_len <= size - 8;
  if (!framed || choice == 0) return LLVMFuzzerMutate(data, size, max_size);

  const size_t header_end = 8 + static_cast<size_t>(header_len);
  const size_t data_size = size - header_end;
  if (choice <= 2 && data_size > 0) {  // the data section only
    return header_end + LLVMFuzzerMutate(data + header_end, data_size, max_size - header_end);
  }
  // The header text only: set the data section aside, mutate in place, put it back after the
  // new header and write the new length.
  const std::vector<uint8_t> tail(data + header_end, data + size);
  const size_t new_len = LLVMFuzzerMutate(data + 8, static_cast<size_t>(header_len), max_size - 8 - data_size);
  if (!tail.empty()) std::memcpy(data + 8 + new_len, tail.data(), tail.size());
  const uint64_t len = new_len;
  std::memcpy(data, &len, 8);
  return 8 + new_len + tail.size();
}
