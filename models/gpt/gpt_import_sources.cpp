// Reading GPT weights from where a layout says they lie (gpt_import_internal.h): straight into a
// parameter when the stored dtype is the parameter's, else through a scratch buffer, converted
// or (Hugging Face's Conv1D) transposed in tiles.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <stdexcept>

#include "attograd/core/format.h"
#include "attograd/core/parallel.h"
#include "attograd/models/gpt/gpt_import_internal.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/crc32c.h"

namespace ag::gpt_import {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("GPT weights '" + path + "': " + what);
}


namespace {

// n values of type From at `in` into To at `out`.
template <typename From, typename To>
void convert(const void* in, To* out, int64_t n) {
  const From* src = static_cast<const From*>(in);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(src[i]);
}

template <typename To>
void convert_any(SafetensorsDType from, const void* in, To* out, int64_t n) {
  with_stored_type(from, [&]<typename From>(From) { convert<From>(in, out, n); });
}

// dst (out, in) = columns [first, first + out) of src (in, n), transposed, in tiles of 32 x 32:
// each tile is read as 32 runs of 32 consecutive source values and written as 32 runs of 32
// consecutive destination values, so both sides stream; the tile rows are split over the pool.
template <typename From, typename To>
void transpose_columns(const From* src, int64_t in, int64_t n, int64_t first, To* dst, int64_t out) {
  constexpr int64_t kTile = 32;
  const int64_t tiles = (out + kTile - 1) / kTile;
  parallel_for(tiles, parallel_chunks(tiles, 4.0 * static_cast<double>(out) * static_cast<double>(in)),
               [&](int64_t begin, int64_t end) {
                 To tile[kTile][kTile];
                 for (int64_t t = begin; t < end; ++t) {
                   const int64_t o0 = t * kTile, os = std::min(kTile, out - o0);
                   for (int64_t i0 = 0; i0 < in; i0 += kTile) {
                     const int64_t is = std::min(kTile, in - i0);
                     for (int64_t i = 0; i < is; ++i) {
                       const From* row = src + (i0 + i) * n + first + o0;
                       for (int64_t o = 0; o < os; ++o) tile[o][i] = static_cast<To>(row[o]);
                     }
                     for (int64_t o = 0; o < os; ++o) std::memcpy(dst + (o0 + o) * in + i0, tile[o], static_cast<size_t>(is) * sizeof(To));
                   }
                 }
               });
}

// A weight no trained model has (NaN, an infinity, or beyond checkpoint.h's bound) is named with
// its file, tensor and element before any parameter changes, rather than found at the first logit
// it poisons. What each parameter reads is scanned, in pieces of 1 MiB (Conv1D's c_attn once).
void check_values(const FileReader& file, const std::vector<Source>& sources) {
  constexpr size_t kPiece = size_t{1} << 20;
  std::vector<char> piece(kPiece);
  std::set<uint64_t> scanned;  // Conv1D's c_attn, read whole by the three parameters it serves
  for (const Source& s : sources) {
    if (s.columns && !scanned.insert(s.offset).second) continue;
    const size_t elem = safetensors_element_size(s.dtype);
    // The elements the source reads: its run, or a Conv1D weight whole.
    const uint64_t begin = s.columns ? 0 : static_cast<uint64_t>(s.first) * elem;
    const uint64_t total = static_cast<uint64_t>(s.columns ? s.stored.numel() : s.count) * elem;
    for (uint64_t at = 0; at < total; at += kPiece) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, total - at));
      file.read(s.offset + begin + at, piece.data(), n);
      // The first value outside the bound, if any, as a double.
      int64_t bad = -1;
      double v = 0;
      with_stored_type(s.dtype, [&]<typename From>(From) {
        for (size_t i = 0; i < n / elem && bad < 0; ++i) {
          From stored;
          std::memcpy(&stored, piece.data() + i * elem, sizeof stored);
          v = static_cast<double>(stored);
          if (!std::isfinite(v) || std::abs(v) > kMaxParameterMagnitude) bad = static_cast<int64_t>(i);
        }
      });
      if (bad < 0) continue;
      std::ostringstream value;
      value << v;
      fail(file.path(), "tensor '" + s.name + "' holds " + value.str() + " at element " +
                            std::to_string((begin + at) / elem + static_cast<uint64_t>(bad)) +
                            " (weights must be finite and within " + format_number(kMaxParameterMagnitude) +
                            "); nothing was read");
    }
  }
}

}  // namespace

// Reads every source into its parameter. `scratch` holds a stored tensor that is transposed or
// converted; the Conv1D c_attn weight serves three parameters and is read once.
void read_sources(const FileReader& file, const std::vector<Source>& sources, std::map<std::string, Variable>& params) {
  check_values(file, sources);
  std::vector<char> scratch;
  std::string in_scratch;  // the stored tensor scratch holds whole, if any
  for (const Source& s : sources) {
    Variable p = params.at(s.param);
    Tensor& value = p.mutable_value();
    const size_t elem = safetensors_element_size(s.dtype);
    const bool same_type = (s.dtype == SafetensorsDType::F32) == (value.dtype() == DType::f32);
    if (s.columns) {
      if (in_scratch != s.name) {
        scratch.resize(static_cast<size_t>(s.stored.numel()) * elem);
        file.read(s.offset, scratch.data(), scratch.size());
        in_scratch = s.name;
      }
      const int64_t in = s.stored[0], n = s.stored[1], out = value.shape()[0];
      dispatch(value.dtype(), [&]<typename T>(T) {
        with_stored_type(s.dtype, [&]<typename From>(From) {
          transpose_columns(reinterpret_cast<const From*>(scratch.data()), in, n, s.first, value.data<T>(), out);
        });
      });
      continue;
    }
    const uint64_t at = s.offset + static_cast<uint64_t>(s.first) * elem;
    const size_t bytes = static_cast<size_t>(s.count) * elem;
    const void* read_to = nullptr;
    if (same_type) {
      file.read(at, value.raw_data(), bytes);
      read_to = value.raw_data();
    } else {
      scratch.resize(bytes);
      in_scratch.clear();
      file.read(at, scratch.data(), bytes);
      read_to = scratch.data();
      dispatch(value.dtype(), [&]<typename T>(T) { convert_any(s.dtype, scratch.data(), value.data<T>(), s.count); });
    }
    if (s.crc && crc32c(read_to, bytes) != *s.crc) {
      fail(file.path(), "tensor '" + s.name + "' fails its CRC-32C check: its bytes were changed after it was written");
    }
    const int64_t rest = value.numel() - s.count;
    if (rest > 0) std::memset(static_cast<char*>(value.raw_data()) + s.count * dtype_size(value.dtype()), 0,
                              static_cast<size_t>(rest) * dtype_size(value.dtype()));
  }
}

std::map<std::string, Variable> params_by_name(const GPT& model) {
  std::map<std::string, Variable> out;
  for (const auto& [name, p] : model.named_parameters()) out.emplace(name, p);
  return out;
}

}  // namespace ag::gpt_import
