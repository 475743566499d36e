#include "attograd/models/seq2seq/seq2seq_tasks.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/format.h"
#include "attograd/core/kernels.h"
#include "attograd/core/rng.h"

namespace ag {

namespace {

constexpr uint64_t kTrainDomain = 2;  // apart from the toy tasks' 0 and 1
constexpr uint64_t kEvalDomain = 3;
constexpr int64_t kPlusToken = kFirstContentToken + 10;  // addition: after the ten digits

// Uniform draws from one counter-based stream.
class Draws {
 public:
  explicit Draws(uint64_t key) : key_(key) {}
  // Uniform in [low, high]; the modulo bias is below (high - low + 1) / 2^64.
  int64_t uniform(int64_t low, int64_t high) {
    return low + static_cast<int64_t>(Generator::bits(key_, counter_++) % static_cast<uint64_t>(high - low + 1));
  }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

std::vector<int64_t> digits_of(int64_t n) {
  std::vector<int64_t> out;
  do {
    out.push_back(kFirstContentToken + n % 10);
    n /= 10;
  } while (n > 0);
  std::reverse(out.begin(), out.end());
  return out;
}

// A number of exactly `digits` digits (no leading zero unless it is 0 itself).
int64_t draw_number(Draws& d, int64_t digits) {
  int64_t n = digits == 1 ? d.uniform(0, 9) : d.uniform(1, 9);
  for (int64_t i = 1; i < digits; ++i) n = n * 10 + d.uniform(0, 9);
  return n;
}

using Kind = Seq2SeqTaskKind;
constexpr Named<Kind> kSeq2SeqTaskNames[] = {
    {Kind::addition, "addition"}, {Kind::reverse_var, "reverse-var"}, {Kind::sort_var, "sort-var"}, {Kind::dedup, "dedup"}};

}  // namespace

const char* seq2seq_task_name(Seq2SeqTaskKind kind) { return name_of(kSeq2SeqTaskNames, kind); }

Seq2SeqTaskKind parse_seq2seq_task_kind(const std::string& name) {
  return named(kSeq2SeqTaskNames, name, "seq2seq task");
}

void validate(const Seq2SeqTaskOptions& o) {
  const std::string task = std::string("task ") + seq2seq_task_name(o.kind) + ": ";
  using L = Seq2SeqTaskLimits;
  const int64_t longest = o.kind == Seq2SeqTaskKind::addition ? L::addition_digits : L::max_len;
  check_in_range(task, "min_len", o.min_len, 1, longest);
  check_in_range(task, "max_len", o.max_len, o.min_len, longest);
  check_in_range(task, "batch_size", o.batch_size, 1, L::batch_size);
  if (o.kind != Seq2SeqTaskKind::addition) check_in_range(task, "symbols", o.symbols, 1, L::symbols);
}

Seq2SeqTask::Seq2SeqTask(const Seq2SeqTaskOptions& options) : options_(options) { validate(options); }

int64_t Seq2SeqTask::vocab_size() const {
  return options_.kind == Seq2SeqTaskKind::addition ? kPlusToken + 1 : kFirstContentToken + options_.symbols;
}

int64_t Seq2SeqTask::max_source_len() const {
  return options_.kind == Seq2SeqTaskKind::addition ? 2 * options_.max_len + 1 : options_.max_len;
}

int64_t Seq2SeqTask::max_target_len() const {
  return options_.kind == Seq2SeqTaskKind::addition ? options_.max_len + 1 : options_.max_len;
}

std::vector<int64_t> Seq2SeqTask::transform(std::span<const int64_t> source) const {
  const std::string op = std::string("task ") + seq2seq_task_name(options_.kind) + ": ";
  for (int64_t t : source) {
    if (t < kFirstContentToken || t >= vocab_size()) {
      throw std::invalid_argument(op + "source token " + std::to_string(t) + " is not content (outside [" +
                                  std::to_string(kFirstContentToken) + ", " + std::to_string(vocab_size()) + "))");
    }
  }
  std::vector<int64_t> out(source.begin(), source.end());
  switch (options_.kind) {
    case Seq2SeqTaskKind::addition: {
      const auto plus = std::find(source.begin(), source.end(), kPlusToken);
      const auto number = [&](auto begin, auto end) {
        if (begin == end || end - begin > Seq2SeqTaskLimits::addition_digits || std::find(begin, end, kPlusToken) != end) {
          throw std::invalid_argument(op + "the source must be <digits>+<digits> with at most " +
                                      std::to_string(Seq2SeqTaskLimits::addition_digits) + " digits each");
        }
        int64_t n = 0;
        for (auto it = begin; it != end; ++it) n = n * 10 + (*it - kFirstContentToken);
        return n;
      };
      if (plus == source.end()) number(source.end(), source.end());  // throws: no '+'
      return digits_of(number(source.begin(), plus) + number(plus + 1, source.end()));
    }
    case Seq2SeqTaskKind::reverse_var: std::reverse(out.begin(), out.end()); return out;
    case Seq2SeqTaskKind::sort_var: std::sort(out.begin(), out.end()); return out;
    case Seq2SeqTaskKind::dedup: out.erase(std::unique(out.begin(), out.end()), out.end()); return out;
  }
  return out;
}

std::string Seq2SeqTask::to_text(std::span<const int64_t> tokens) const {
  std::string s;
  for (int64_t t : tokens) {
    if (t == kPadToken) s += "<pad>";
    else if (t == kBosToken) s += "<s>";
    else if (t == kEosToken) s += "</s>";
    else if (options_.kind == Seq2SeqTaskKind::addition) s += t == kPlusToken ? '+' : static_cast<char>('0' + t - kFirstContentToken);
    else if (t - kFirstContentToken < 26) s += static_cast<char>('a' + t - kFirstContentToken);
    else s.append("[").append(std::to_string(t - kFirstContentToken)).append("]");
  }
  return s;
}

Seq2SeqBatch Seq2SeqTask::make_batch(uint64_t seed, uint64_t index, uint64_t domain) const {
  Generator gen(seed);
  gen.set_state(GeneratorState{seed, index, domain});
  Draws d(gen.next_stream());
  const Seq2SeqTaskOptions& o = options_;
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> examples;
  for (int64_t b = 0; b < o.batch_size; ++b) {
    std::vector<int64_t> src;
    if (o.kind == Seq2SeqTaskKind::addition) {
      src = digits_of(draw_number(d, d.uniform(o.min_len, o.max_len)));
      src.push_back(kPlusToken);
      const std::vector<int64_t> second = digits_of(draw_number(d, d.uniform(o.min_len, o.max_len)));
      src.insert(src.end(), second.begin(), second.end());
    } else {
      const int64_t n = d.uniform(o.min_len, o.max_len);
      for (int64_t i = 0; i < n; ++i) {
        // dedup: half the symbols repeat the one before, so there is something to drop.
        const bool repeat = o.kind == Seq2SeqTaskKind::dedup && i > 0 && d.uniform(0, 1) == 1;
        src.push_back(repeat ? src.back() : kFirstContentToken + d.uniform(0, o.symbols - 1));
      }
    }
    std::vector<int64_t> tgt = transform(src);
    examples.emplace_back(std::move(src), std::move(tgt));
  }
  return pad_batch(examples);
}

Seq2SeqBatch Seq2SeqTask::train_batch(uint64_t index) const { return make_batch(options_.seed, index, kTrainDomain); }

Seq2SeqBatch Seq2SeqTask::eval_batch(uint64_t index) const { return make_batch(options_.eval_seed, index, kEvalDomain); }

Seq2SeqBatch pad_batch(const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& examples) {
  if (examples.empty()) throw std::invalid_argument("pad_batch: no examples");
  int64_t S = 0, T = 0;
  for (const auto& [src, tgt] : examples) {
    if (src.empty()) throw std::invalid_argument("pad_batch: an empty source (every source needs a token)");
    S = std::max(S, static_cast<int64_t>(src.size()));
    T = std::max(T, static_cast<int64_t>(tgt.size()) + 1);  // bos / eos
  }
  const int64_t B = static_cast<int64_t>(examples.size());
  Seq2SeqBatch batch{Indices(Shape{B, S}, std::vector<int64_t>(static_cast<size_t>(B * S), kPadToken)), {},
                     Indices(Shape{B, T}, std::vector<int64_t>(static_cast<size_t>(B * T), kPadToken)),
                     Indices(Shape{B, T}, std::vector<int64_t>(static_cast<size_t>(B * T), kSeq2SeqIgnore)), {}};
  for (int64_t b = 0; b < B; ++b) {
    const auto& [src, tgt] = examples[static_cast<size_t>(b)];
    std::copy(src.begin(), src.end(), batch.src.data.begin() + b * S);
    batch.tgt_in.data[static_cast<size_t>(b * T)] = kBosToken;
    std::copy(tgt.begin(), tgt.end(), batch.tgt_in.data.begin() + b * T + 1);
    std::copy(tgt.begin(), tgt.end(), batch.tgt_out.data.begin() + b * T);
    batch.tgt_out.data[static_cast<size_t>(b * T) + tgt.size()] = kEosToken;
    batch.src_lengths.push_back(static_cast<int64_t>(src.size()));
    batch.tgt_lengths.push_back(static_cast<int64_t>(tgt.size()) + 1);
  }
  return batch;
}

SequenceMetrics seq2seq_metrics(const Tensor& logits, const Indices& tgt_out) {
  if (!logits.defined() || logits.dim() != 3 || tgt_out.shape != Shape{logits.size(0), logits.size(1)}) {
    throw std::invalid_argument("seq2seq_metrics: logits must be (B, T, V) and tgt_out (B, T), got logits " +
                                (logits.defined() ? logits.shape().str() : std::string("undefined")) + " and tgt_out " +
                                tgt_out.shape.str());
  }
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  const Tensor logp = kernels::log_softmax(logits, -1);
  const Indices predicted = predict_tokens(logits);  // the raw logits' argmax, the first of ties
  const std::vector<double> lp = logp.to_vector();
  SequenceMetrics m;
  for (int64_t b = 0; b < B; ++b) {
    bool all_correct = true;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t flat = b * T + t, target = tgt_out[flat];
      if (target == kSeq2SeqIgnore) continue;
      if (target < 0 || target >= V) {
        throw std::invalid_argument("seq2seq_metrics: target " + std::to_string(target) + " at (" + std::to_string(b) +
                                    ", " + std::to_string(t) + ") is outside [0, " + std::to_string(V) + ")");
      }
      m.loss_sum -= lp[static_cast<size_t>(flat * V + target)];
      ++m.tokens;
      const bool correct = predicted[flat] == target;
      m.correct_tokens += correct ? 1 : 0;
      all_correct = all_correct && correct;
    }
    m.correct_sequences += all_correct ? 1 : 0;
  }
  m.sequences = B;
  return m;
}

}  // namespace ag
