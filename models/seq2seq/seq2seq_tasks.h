// Variable-length sequence-to-sequence tasks for the encoder-decoder (models/seq2seq/seq2seq.h),
// generated on the fly: every batch is a pure function of (seed, batch index, train/eval).
//
//   Seq2SeqTask task({.kind = Seq2SeqTaskKind::addition});
//   Seq2SeqBatch b = task.train_batch(step);
//   Variable logits = model(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);
//   Variable loss = cross_entropy(logits, b.tgt_out, {.ignore_index = kSeq2SeqIgnore});
//
// The tasks (source -> target, lengths drawn per example):
//   addition     "417+38" -> "455": two operands of min_len..max_len digits each (no leading
//                zero), digits and '+' as tokens; the target is the sum's digits
//   reverse-var  a sequence of min_len..max_len symbols -> the same reversed
//   sort-var     ... -> the same sorted ascending (by token id)
//   dedup        ... -> adjacent repeats dropped ("aabccca" -> "abca"): the target is shorter
//                than the source whenever the source repeats (each symbol repeats the one before
//                it with probability 1/2)
//
// Tokens: 0 pad, 1 bos, 2 eos, then the content: addition's digits 0..9 are tokens 3..12 and
// '+' is 13 (vocab 14); the other tasks' `symbols` symbols are tokens 3 .. 3 + symbols - 1
// (vocab 3 + symbols). One vocabulary serves both sides.
//
// A batch pads every sequence to the longest of its side in that batch:
//   src      (B, S)  the source, pad after src_lengths[b]
//   tgt_in   (B, T)  bos y_1 .. y_n, pad after tgt_lengths[b] = n + 1  (the decoder's input)
//   tgt_out  (B, T)  y_1 .. y_n eos, kSeq2SeqIgnore after it              (what it predicts)
// so cross_entropy with ignore_index = kSeq2SeqIgnore and seq2seq_metrics count real tokens only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attograd/core/indices.h"
#include "attograd/core/tensor.h"
#include "attograd/train/metrics.h"

namespace ag {

enum class Seq2SeqTaskKind { addition, reverse_var, sort_var, dedup };
const char* seq2seq_task_name(Seq2SeqTaskKind kind);  // "addition", "reverse-var", "sort-var", "dedup"
// Inverse of seq2seq_task_name; std::invalid_argument listing the choices otherwise.
Seq2SeqTaskKind parse_seq2seq_task_kind(const std::string& name);

inline constexpr int64_t kPadToken = 0;
inline constexpr int64_t kBosToken = 1;
inline constexpr int64_t kEosToken = 2;
inline constexpr int64_t kFirstContentToken = 3;
inline constexpr int64_t kSeq2SeqIgnore = -100;  // tgt_out past each target: cross_entropy's default ignore_index

struct Seq2SeqTaskLimits {
  static constexpr int64_t symbols = int64_t{1} << 16;
  static constexpr int64_t max_len = 1024;
  static constexpr int64_t addition_digits = 18;  // the sum of two 18-digit numbers fits int64
  static constexpr int64_t batch_size = int64_t{1} << 16;
};

struct Seq2SeqTaskOptions {
  Seq2SeqTaskKind kind = Seq2SeqTaskKind::reverse_var;
  int64_t symbols = 10;  // distinct content tokens; not used by addition (ten digits)
  int64_t min_len = 1;   // source length range; addition: digits per operand
  int64_t max_len = 8;
  int64_t batch_size = 32;
  uint64_t seed = 0;
  uint64_t eval_seed = kDefaultEvalSeed;
};

struct Seq2SeqBatch {
  Indices src;
  std::vector<int64_t> src_lengths;
  Indices tgt_in;
  Indices tgt_out;
  std::vector<int64_t> tgt_lengths;
};

// std::invalid_argument naming the option and its value.
void validate(const Seq2SeqTaskOptions& options);

class Seq2SeqTask {
 public:
  explicit Seq2SeqTask(const Seq2SeqTaskOptions& options);  // validates them

  Seq2SeqBatch train_batch(uint64_t index) const;
  Seq2SeqBatch eval_batch(uint64_t index) const;
  // The target content of one source (content tokens only, no bos / eos / pad).
  std::vector<int64_t> transform(std::span<const int64_t> source) const;

  int64_t vocab_size() const;
  // The longest source and the longest target content any example can have; a model needs
  // max_len >= max(max_source_len(), max_target_len() + 1).
  int64_t max_source_len() const;
  int64_t max_target_len() const;
  // Content tokens as text: digits and '+' for addition, letters a, b, ... otherwise (symbol
  // numbers in brackets past z); pad, bos and eos as <pad>, <s>, </s>.
  std::string to_text(std::span<const int64_t> tokens) const;

  const Seq2SeqTaskOptions& options() const { return options_; }

 private:
  Seq2SeqBatch make_batch(uint64_t seed, uint64_t index, uint64_t domain) const;
  Seq2SeqTaskOptions options_;
};

// Pads (source, target content) pairs into a batch as described above.
Seq2SeqBatch pad_batch(const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& examples);

// Loss and accuracies over the real target tokens (tgt_out != kSeq2SeqIgnore): a sequence is
// correct when every one of its real tokens (eos included) is. logits (B, T, V), tgt_out (B, T).
SequenceMetrics seq2seq_metrics(const Tensor& logits, const Indices& tgt_out);

}  // namespace ag
