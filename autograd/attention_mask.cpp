#include "attograd/autograd/attention_mask.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "attograd/core/kernels.h"
#include "attograd/core/prefix_gemm.h"

namespace ag {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// The values of a keep pattern must be 0 or 1; returns it as contiguous f32 of `shape`.
Tensor checked_pattern(const Tensor& keep, const Shape& shape, const char* op) {
  const std::vector<double> values = keep.to_vector();
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != 0.0 && values[i] != 1.0) {
      std::ostringstream os;
      os << op << ": values must be 0 (hidden) or 1 (seen); found " << values[i] << " at flat index " << i
         << " of a tensor of shape " << keep.shape();
      throw std::invalid_argument(os.str());
    }
  }
  return keep.to(DType::f32).reshape(shape).contiguous();
}

// Index along a mask axis of size `size` (1 = shared by every index).
int64_t at(int64_t size, int64_t i) { return size == 1 ? 0 : i; }

}  // namespace

AttentionMask AttentionMask::causal(int64_t T, int64_t offset) {
  if (T <= 0 || offset < 0) {
    throw std::invalid_argument("AttentionMask::causal: needs T > 0 queries and offset >= 0 earlier keys, got T=" +
                                str(T) + " offset=" + str(offset));
  }
  AttentionMask m;
  // One query sees all of its T + offset keys: nothing is hidden, only the shape says more.
  m.causal_ = T > 1;
  m.offset_ = offset;
  m.shape_ = Shape{1, 1, T, T + offset};
  m.description_ = offset == 0 ? "causal(" + str(T) + ")" : "causal(" + str(T) + ", offset=" + str(offset) + ")";
  return m;
}

AttentionMask AttentionMask::key_padding(const std::vector<int64_t>& lengths, int64_t Tk) {
  const int64_t B = static_cast<int64_t>(lengths.size());
  if (B == 0 || Tk <= 0) {
    throw std::invalid_argument("AttentionMask::key_padding: needs at least one length and Tk > 0, got " + str(B) +
                                " lengths and Tk=" + str(Tk));
  }
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[static_cast<size_t>(b)];
    if (n < 0 || n > Tk) {
      throw std::invalid_argument("AttentionMask::key_padding: length " + str(n) + " of batch element " + str(b) +
                                  " is outside [0, Tk=" + str(Tk) + "]");
    }
  }
  AttentionMask m;
  m.lengths_ = lengths;
  m.shape_ = Shape{B, 1, 1, Tk};
  m.description_ = "key_padding(B=" + str(B) + ", Tk=" + str(Tk) + ")";
  return m;
}

AttentionMask AttentionMask::key_padding(const Indices& lengths, int64_t Tk) {
  if (lengths.shape.rank() != 1) {
    throw std::invalid_argument("AttentionMask::key_padding: lengths must have shape (B), got " + lengths.shape.str());
  }
  return key_padding(lengths.data, Tk);
}

AttentionMask AttentionMask::keep(const Tensor& keep) {
  if (!keep.defined()) throw std::invalid_argument("AttentionMask::keep: the tensor is undefined");
  const Shape& s = keep.shape();
  if (s.rank() == 3) {
    throw std::invalid_argument(
        "AttentionMask::keep: a rank-3 tensor " + s.str() +
        " could be (B, Tq, Tk) or (H, Tq, Tk); say which with AttentionMask::keep_per_batch or "
        "AttentionMask::keep_per_head, or give all four axes (B, H, Tq, Tk) with size 1 on shared ones");
  }
  if (s.rank() != 2 && s.rank() != 4) {
    throw std::invalid_argument("AttentionMask::keep: expected (Tq, Tk) or (B, H, Tq, Tk), got shape " + s.str() +
                                "; key_padding takes per-sequence lengths");
  }
  AttentionMask m;
  m.shape_ = s.rank() == 4 ? s : Shape{1, 1, s[0], s[1]};
  m.keep_ = checked_pattern(keep, m.shape_, "AttentionMask::keep");
  m.description_ = "keep" + s.str();
  return m;
}

AttentionMask AttentionMask::keep_per_batch(const Tensor& keep) {
  if (!keep.defined() || keep.dim() != 3) {
    throw std::invalid_argument("AttentionMask::keep_per_batch: expected (B, Tq, Tk), got " +
                                (keep.defined() ? keep.shape().str() : std::string("undefined")));
  }
  AttentionMask m;
  m.shape_ = Shape{keep.shape()[0], 1, keep.shape()[1], keep.shape()[2]};
  m.keep_ = checked_pattern(keep, m.shape_, "AttentionMask::keep_per_batch");
  m.description_ = "keep_per_batch" + keep.shape().str();
  return m;
}

AttentionMask AttentionMask::keep_per_head(const Tensor& keep) {
  if (!keep.defined() || keep.dim() != 3) {
    throw std::invalid_argument("AttentionMask::keep_per_head: expected (H, Tq, Tk), got " +
                                (keep.defined() ? keep.shape().str() : std::string("undefined")));
  }
  AttentionMask m;
  m.shape_ = Shape{1, keep.shape()[0], keep.shape()[1], keep.shape()[2]};
  m.keep_ = checked_pattern(keep, m.shape_, "AttentionMask::keep_per_head");
  m.description_ = "keep_per_head" + keep.shape().str();
  return m;
}

AttentionMask operator&(const AttentionMask& a, const AttentionMask& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  AttentionMask m;
  m.description_ = a.description_ + " & " + b.description_;
  const std::string op = "AttentionMask: " + m.description_;
  m.shape_ = broadcast_shapes(a.shape_, b.shape_, op.c_str());  // throws naming both masks and shapes
  // Two causal parts of shapes that broadcast have the same T and offset.
  m.causal_ = a.causal_ || b.causal_;
  m.offset_ = a.causal_ ? a.offset_ : b.offset_;
  if (a.lengths_.empty() || b.lengths_.empty()) {
    m.lengths_ = a.lengths_.empty() ? b.lengths_ : a.lengths_;
  } else {
    const size_t n = std::max(a.lengths_.size(), b.lengths_.size());
    for (size_t i = 0; i < n; ++i) {
      m.lengths_.push_back(std::min(a.lengths_[a.lengths_.size() == 1 ? 0 : i], b.lengths_[b.lengths_.size() == 1 ? 0 : i]));
    }
  }
  if (a.keep_.defined() && b.keep_.defined()) {
    m.keep_ = kernels::mul(a.keep_, b.keep_);
  } else {
    m.keep_ = a.keep_.defined() ? a.keep_ : b.keep_;
  }
  return m;
}

void AttentionMask::check(const char* op, int64_t B, int64_t H, int64_t Tq, int64_t Tk) const {
  const Shape target{B, H, Tq, Tk};
  if (!empty() && !broadcastable_to(shape_, target)) {
    throw std::invalid_argument(std::string(op) + ": mask " + description_ + " of shape " + shape_.str() +
                                " does not broadcast to the attention scores (B, H, Tq, Tk) = " + target.str());
  }
}

bool AttentionMask::same_for_every_slice() const {
  return lengths_.empty() && (!keep_.defined() || (keep_.shape()[0] == 1 && keep_.shape()[1] == 1));
}

void AttentionMask::reach_of(int64_t b, int64_t h, int64_t Tq, int64_t Tk, std::vector<int64_t>& reach) const {
  reach.assign(static_cast<size_t>(Tq), Tk);
  const int64_t length = lengths_.empty() ? Tk : lengths_[static_cast<size_t>(at(static_cast<int64_t>(lengths_.size()), b))];
  const float* pattern = nullptr;
  int64_t row_stride = 0, step = 0;
  if (keep_.defined()) {
    const Shape& s = keep_.shape();
    pattern = keep_.data<float>() + (at(s[0], b) * s[1] + at(s[1], h)) * s[2] * s[3];
    row_stride = s[2] == 1 ? 0 : s[3];
    step = s[3] == 1 ? 0 : 1;
  }
  for (int64_t q = 0; q < Tq; ++q) {
    int64_t r = std::min(Tk, length);
    if (causal_) r = std::min(r, q + offset_ + 1);
    if (pattern) r = last_nonzero_end(pattern + q * row_stride, r, step);
    reach[static_cast<size_t>(q)] = r;
  }
}

Tensor AttentionMask::keep_tensor() const {
  if (empty()) return Tensor();
  Tensor out = zeros(shape_);
  float* p = out.data<float>();
  const int64_t B = shape_[0], H = shape_[1], Tq = shape_[2], Tk = shape_[3];
  const Tensor pattern = keep_.defined() ? keep_.expand(shape_) : Tensor();
  std::vector<int64_t> reach;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      reach_of(b, h, Tq, Tk, reach);
      for (int64_t q = 0; q < Tq; ++q) {
        float* row = p + ((b * H + h) * Tq + q) * Tk;
        for (int64_t j = 0; j < reach[static_cast<size_t>(q)]; ++j) {
          row[j] = pattern.defined() ? static_cast<float>(pattern.at({b, h, q, j})) : 1.0f;
        }
      }
    }
  }
  return out;
}

Tensor AttentionMask::rows_with_keys() const {
  if (empty()) return Tensor();
  if (!keep_.defined()) {
    // Causal rows always see key 0 (offset >= 0): only a zero length hides a whole row.
    if (std::find(lengths_.begin(), lengths_.end(), 0) == lengths_.end()) return Tensor();
    const int64_t B = static_cast<int64_t>(lengths_.size());
    Tensor rows = zeros({B, 1, 1, 1});
    for (int64_t b = 0; b < B; ++b) rows.data<float>()[b] = lengths_[static_cast<size_t>(b)] > 0 ? 1.0f : 0.0f;
    return rows;
  }
  const int64_t B = shape_[0], H = shape_[1], Tq = shape_[2], Tk = shape_[3];
  Tensor rows = zeros({B, 1, Tq, 1});
  float* p = rows.data<float>();
  bool any_empty = false;
  std::vector<int64_t> reach;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      reach_of(b, h, Tq, Tk, reach);
      for (int64_t q = 0; q < Tq; ++q) {
        if (reach[static_cast<size_t>(q)] > 0) p[b * Tq + q] = 1.0f;
      }
    }
  }
  for (int64_t i = 0; i < B * Tq; ++i) any_empty |= p[i] == 0.0f;
  return any_empty ? rows : Tensor();
}

}  // namespace ag
