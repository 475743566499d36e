#include "attograd/text/text_stream.h"

#include <algorithm>
#include <stdexcept>

namespace ag {

ChunkedEncoder::ChunkedEncoder(const Tokenizer& tokenizer, size_t chunk_bytes)
    : tokenizer_(tokenizer), chunk_bytes_(chunk_bytes) {
  next_try_ = chunk_bytes;
  if (chunk_bytes < 1) throw std::invalid_argument("ChunkedEncoder: chunk_bytes must be >= 1");
}

void ChunkedEncoder::push(std::string_view bytes, std::vector<int64_t>& out) {
  while (!bytes.empty()) {
    const size_t take = std::min(bytes.size(), next_try_ > pending_.size() ? next_try_ - pending_.size() : 0);
    pending_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (pending_.size() < next_try_) continue;
    // Only the text not searched before (and the byte before it) can hold a new place to cut.
    const size_t cut = last_safe_cut(pending_, tokenizer_, searched_ > 0 ? searched_ - 1 : 0);
    if (cut == 0) {  // none yet: gather another chunk
      searched_ = pending_.size();
      next_try_ = pending_.size() + chunk_bytes_;
      continue;
    }
    const std::vector<int64_t> ids = tokenizer_.encode(pending_.substr(0, cut));
    out.insert(out.end(), ids.begin(), ids.end());
    pending_.erase(0, cut);
    // What is left holds no place to cut (the cut was the last): search from its end on.
    searched_ = pending_.size();
    next_try_ = pending_.size() + chunk_bytes_;
  }
}

void ChunkedEncoder::finish(std::vector<int64_t>& out) {
  if (pending_.empty()) return;
  const std::vector<int64_t> ids = tokenizer_.encode(pending_);
  out.insert(out.end(), ids.begin(), ids.end());
  pending_.clear();
  searched_ = 0;
  next_try_ = chunk_bytes_;
}

}  // namespace ag
