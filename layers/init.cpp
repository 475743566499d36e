#include "attograd/layers/init.h"

#include "attograd/core/parallel.h"
#include "attograd/core/rng.h"
#include "attograd/core/skip_init.h"

namespace ag {

void init_normal(const Variable& p, double std) {
  if (init_skipped()) return;  // the layers left zeros; the caller overwrites them
  Variable handle = p;
  Tensor& value = handle.mutable_value();
  const uint64_t key = default_generator().next_stream();
  dispatch(value.dtype(), [&]<typename T>(T) {
    T* out = value.data<T>();
    const int64_t n = value.numel();
    parallel_for(n, parallel_chunks(n, 40.0 * static_cast<double>(n)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        out[i] = static_cast<T>(0.0 + std * Generator::normal(key, static_cast<uint64_t>(i)));
      }
    });
  });
}

void init_linear(Linear& linear, double std) {
  init_normal(linear.weight(), std);
  if (linear.bias().defined()) {
    Variable bias = linear.bias();
    bias.mutable_value().fill_(0.0);
  }
}

}  // namespace ag
