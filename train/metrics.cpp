#include "attograd/train/metrics.h"

#include <stdexcept>
#include <string>

#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"

namespace ag {

namespace {

// The index of the largest of n contiguous values (the first of ties).
template <typename T>
int64_t argmax_row(const T* row, int64_t n) {
  int64_t best = 0;
  for (int64_t v = 1; v < n; ++v) {
    if (row[v] > row[best]) best = v;
  }
  return best;
}

void check_logits(const Tensor& logits, const char* op) {
  if (!logits.defined() || logits.dim() != 3) {
    throw std::invalid_argument(std::string(op) + ": logits must be (B, T, V), got " +
                                (logits.defined() ? logits.shape().str() : std::string("undefined")));
  }
}

}  // namespace

double SequenceMetrics::loss() const { return tokens == 0 ? 0.0 : loss_sum / static_cast<double>(tokens); }

double SequenceMetrics::token_accuracy() const {
  return tokens == 0 ? 0.0 : static_cast<double>(correct_tokens) / static_cast<double>(tokens);
}

double SequenceMetrics::sequence_accuracy() const {
  return sequences == 0 ? 0.0 : static_cast<double>(correct_sequences) / static_cast<double>(sequences);
}

SequenceMetrics& SequenceMetrics::operator+=(const SequenceMetrics& other) {
  loss_sum += other.loss_sum;
  tokens += other.tokens;
  correct_tokens += other.correct_tokens;
  sequences += other.sequences;
  correct_sequences += other.correct_sequences;
  return *this;
}

SequenceMetrics sequence_metrics(const Tensor& logits, const Indices& targets) {
  check_logits(logits, "sequence_metrics");
  const int64_t b = logits.size(0), t = logits.size(1), v = logits.size(2);
  if (targets.shape != Shape{b, t}) {
    throw std::invalid_argument("sequence_metrics: logits " + logits.shape().str() + " need targets (" +
                                std::to_string(b) + ", " + std::to_string(t) + "), got " + targets.shape.str());
  }
  if (v < 1) throw std::invalid_argument("sequence_metrics: logits " + logits.shape().str() + " have no classes");
  const Tensor logp = kernels::log_softmax(logits, -1);  // contiguous
  // The argmax reads the logits themselves: subtracting the log-sum-exp could round two close
  // scores into a tie.
  const Tensor raw = logits.contiguous();
  SequenceMetrics m;
  dispatch(logp.dtype(), [&]<typename T>(T) {
    const T* lp = logp.data<T>();
    const T* z = raw.data<T>();
    for (int64_t row = 0; row < b; ++row) {
      bool all_correct = true;
      for (int64_t pos = 0; pos < t; ++pos) {
        const int64_t flat = row * t + pos;
        const int64_t target = targets[flat];
        if (target < 0 || target >= v) {
          throw std::invalid_argument("sequence_metrics: target " + std::to_string(target) + " at (" +
                                      std::to_string(row) + ", " + std::to_string(pos) + ") is outside [0, " +
                                      std::to_string(v) + ") for logits " + logits.shape().str());
        }
        m.loss_sum -= static_cast<double>(lp[flat * v + target]);
        const bool correct = argmax_row(z + flat * v, v) == target;
        m.correct_tokens += correct ? 1 : 0;
        all_correct = all_correct && correct;
      }
      m.correct_sequences += all_correct ? 1 : 0;
    }
  });
  m.tokens = b * t;
  m.sequences = b;
  return m;
}

Indices predict_tokens(const Tensor& logits) {
  check_logits(logits, "predict_tokens");
  const int64_t b = logits.size(0), t = logits.size(1), v = logits.size(2);
  if (v < 1) throw std::invalid_argument("predict_tokens: logits " + logits.shape().str() + " have no classes");
  const Tensor c = logits.contiguous();
  std::vector<int64_t> out(static_cast<size_t>(b * t));
  dispatch(c.dtype(), [&]<typename T>(T) {
    const T* p = c.data<T>();
    for (int64_t i = 0; i < b * t; ++i) out[static_cast<size_t>(i)] = argmax_row(p + i * v, v);
  });
  return Indices(Shape{b, t}, std::move(out));
}

}  // namespace ag
