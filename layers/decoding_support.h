// Internal (not installed): what the cached decoding paths share (cached_attention.cpp for
// decoder-only models, cached_decoder.cpp for the encoder-decoder's decoder layers).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "attograd/autograd/grad_mode.h"
#include "attograd/autograd/ops.h"

namespace ag::decoding {

// Cached keys and values are plain tensors, outside any graph: decoding must not record one.
inline void require_no_grad(const char* op) {
  if (grad_enabled()) {
    throw std::logic_error(std::string(op) +
                           ": decoding through a KvCache builds no graph (cached keys and values are plain "
                           "tensors); run it under a NoGradGuard");
  }
}

// (B, T, H * d) -> (B, H, T, d), a view.
inline Variable split_heads(const Variable& x, int64_t n_head, int64_t d) {
  return permute(reshape(x, {x.shape()[0], x.shape()[1], n_head, d}), {0, 2, 1, 3});
}

}  // namespace ag::decoding
