// CRC-32C (the Castagnoli polynomial, as in iSCSI, ext4 and Snappy framing): a checksum that
// checkpoints store per tensor, so that a flipped bit or two swapped tensors are caught on load.
//
//   uint32_t c = crc32c(data, bytes);              // of one block
//   c = crc32c(more, more_bytes, c);               // continued over a second block
//
// crc32c("123456789") == 0xE3069283 (the standard check value).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ag {

uint32_t crc32c(const void* data, size_t bytes, uint32_t previous = 0);

}  // namespace ag
