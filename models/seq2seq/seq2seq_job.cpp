#include "attograd/models/seq2seq/seq2seq_job.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "attograd/autograd/ops.h"
#include "attograd/models/seq2seq/seq2seq_options.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/losses.h"
#include "attograd/train/trainer.h"

namespace ag {

namespace {

using Clock = std::chrono::steady_clock;

// The held-out set is generated in batches of at most this many sources, so that it does not
// depend on the training batch size.
constexpr int64_t kHeldOutBatch = 256;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

Seq2SeqTaskOptions with_batch(Seq2SeqTaskOptions task, int64_t batch) {
  task.batch_size = batch;
  return task;
}

int64_t sum_of(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t n = 0;
  for (size_t i = begin; i < end; ++i) n += v[i];
  return n;
}

void check_fits(const Seq2SeqOptions& m, const Seq2SeqTask& task) {
  const int64_t longest = std::max(task.max_source_len(), task.max_target_len() + 1);
  if (m.src_vocab != task.vocab_size() || m.tgt_vocab != task.vocab_size() || m.max_len < longest) {
    throw std::invalid_argument("Seq2SeqJob: the model (src_vocab " + std::to_string(m.src_vocab) + ", tgt_vocab " +
                                std::to_string(m.tgt_vocab) + ", max_len " + std::to_string(m.max_len) +
                                ") does not fit the task " + seq2seq_task_name(task.options().kind) + " (vocab " +
                                std::to_string(task.vocab_size()) + ", sequences up to " + std::to_string(longest) +
                                " tokens with eos)");
  }
}

}  // namespace

double Seq2SeqMetrics::exact_accuracy() const {
  return sequences > 0 ? static_cast<double>(exact) / static_cast<double>(sequences) : 0.0;
}

double Seq2SeqMetrics::sequences_per_s() const {
  return decode_s > 0 ? static_cast<double>(sequences) / decode_s : 0.0;
}

std::vector<int64_t> target_of(const Seq2SeqBatch& b, int64_t row) {
  const int64_t T = b.tgt_out.shape[1];
  const auto begin = b.tgt_out.data.begin() + row * T;
  return std::vector<int64_t>(begin, begin + (b.tgt_lengths.at(static_cast<size_t>(row)) - 1));
}

std::vector<int64_t> source_of(const Seq2SeqBatch& b, int64_t row) {
  const int64_t S = b.src.shape[1];
  const auto begin = b.src.data.begin() + row * S;
  return std::vector<int64_t>(begin, begin + b.src_lengths.at(static_cast<size_t>(row)));
}

Seq2SeqBatch padded_rows(const Seq2SeqBatch& b, const Shard& rows) {
  const auto first = static_cast<size_t>(rows.begin), last = static_cast<size_t>(rows.begin + rows.rows);
  const auto lengths = [&](const std::vector<int64_t>& v) {
    return std::vector<int64_t>(v.begin() + static_cast<std::ptrdiff_t>(first), v.begin() + static_cast<std::ptrdiff_t>(last));
  };
  return {shard_rows(b.src, rows), lengths(b.src_lengths), shard_rows(b.tgt_in, rows), shard_rows(b.tgt_out, rows),
          lengths(b.tgt_lengths)};
}

Seq2SeqJob::Seq2SeqJob(Seq2Seq& model, const Seq2SeqTaskOptions& task, int64_t eval_sequences)
    : TrainingJob("seq2seq", model, task.batch_size, Seq2SeqTask(task).vocab_size()),
      model_(model),
      task_(task),
      eval_sequences_(eval_sequences) {
  check_fits(model.options(), task_);
  if (eval_sequences < 1 || eval_sequences > TrainerLimits::eval_sequences) {
    throw std::invalid_argument("Seq2SeqJob: eval_sequences must lie in [1, " +
                                std::to_string(TrainerLimits::eval_sequences) + "], got " +
                                std::to_string(eval_sequences));
  }
  const Seq2SeqTask held_out_task(with_batch(task, std::min(eval_sequences_, kHeldOutBatch)));
  for (int64_t left = eval_sequences_, i = 0; left > 0; ++i) {
    Seq2SeqBatch b = held_out_task.eval_batch(static_cast<uint64_t>(i));
    const int64_t rows = std::min(left, b.src.shape[0]);
    held_out_.push_back(rows == b.src.shape[0] ? std::move(b) : padded_rows(b, {.begin = 0, .rows = rows}));
    left -= rows;
  }
}

StepLoss Seq2SeqJob::loss(uint64_t index, const Shard& rows) {
  const Seq2SeqBatch whole = task_.train_batch(index);
  const int64_t tokens = sum_of(whole.src_lengths, 0, whole.src_lengths.size()) +
                         sum_of(whole.tgt_lengths, 0, whole.tgt_lengths.size());
  const int64_t B = whole.src.shape[0];
  if (rows.begin == 0 && rows.rows == B) {
    // logits (B, T, V) against tgt_out (B, T): the mean over the real target tokens.
    const Variable loss = cross_entropy(model_(whole.src, whole.src_lengths, whole.tgt_in, whole.tgt_lengths),
                                        whole.tgt_out, {.ignore_index = kSeq2SeqIgnore});
    return {.loss = loss, .tokens = tokens};
  }
  // This rank's mean over its n_r real target tokens, times N n_r / n: the ranks' average is
  // then the sum over all of the batch's target tokens divided by their count n.
  const Seq2SeqBatch b = padded_rows(whole, rows);
  const auto first = static_cast<size_t>(rows.begin), last = static_cast<size_t>(rows.begin + rows.rows);
  const int64_t mine = sum_of(whole.tgt_lengths, first, last), all = sum_of(whole.tgt_lengths, 0, whole.tgt_lengths.size());
  const double ranks = static_cast<double>(B) / static_cast<double>(rows.rows);  // every shard has B / N rows
  const Variable mean = cross_entropy(model_(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths), b.tgt_out,
                                      {.ignore_index = kSeq2SeqIgnore});
  return {.loss = mean * (ranks * static_cast<double>(mine) / static_cast<double>(all)), .tokens = tokens};
}

Seq2SeqDecodeOptions Seq2SeqJob::decode_options() const {
  Seq2SeqDecodeOptions o;
  o.bos = kBosToken;
  o.eos = kEosToken;
  o.max_tokens = task_.max_target_len() + 1;
  return o;
}

Seq2SeqMetrics Seq2SeqJob::decode(const Seq2SeqBatch& b, const Seq2SeqDecodeOptions& options, bool beam) {
  Seq2SeqMetrics m;
  const Clock::time_point t0 = Clock::now();
  const std::vector<Hypothesis> out = beam ? beam_search(model_, b.src, b.src_lengths, options)
                                           : greedy_decode(model_, b.src, b.src_lengths, options);
  m.decode_s = seconds_since(t0);
  for (int64_t r = 0; r < b.src.shape[0]; ++r) {
    const Hypothesis& h = out[static_cast<size_t>(r)];
    m.exact += h.ended && h.tokens == target_of(b, r) ? 1 : 0;
  }
  m.sequences = b.src.shape[0];
  return m;
}

Seq2SeqMetrics Seq2SeqJob::decode_held_out(const Seq2SeqDecodeOptions& options, bool beam, int64_t sources) {
  Seq2SeqMetrics m;
  int64_t left = sources > 0 ? sources : eval_sequences_;
  for (const Seq2SeqBatch& whole : held_out_) {
    if (left <= 0) break;
    const int64_t rows = std::min(left, whole.src.shape[0]);
    const Seq2SeqMetrics part = decode(rows < whole.src.shape[0] ? padded_rows(whole, {.begin = 0, .rows = rows}) : whole,
                                       options, beam);
    m.exact += part.exact;
    m.sequences += part.sequences;
    m.decode_s += part.decode_s;
    left -= rows;
  }
  return m;
}

Evaluation Seq2SeqJob::evaluate(const Ranks& ranks) {
  Seq2SeqMetrics m;
  const Seq2SeqDecodeOptions greedy = decode_options();
  for (const Seq2SeqBatch& whole : held_out_) {
    const Shard part = ranks.part(whole.src.shape[0]);
    if (part.rows == 0) continue;
    const Seq2SeqBatch b = part.rows == whole.src.shape[0] ? whole : padded_rows(whole, part);
    m.teacher += seq2seq_metrics(model_(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths).value(), b.tgt_out);
  }
  for (const Seq2SeqBatch& whole : held_out_) {
    const Shard part = ranks.part(whole.src.shape[0]);
    if (part.rows == 0) continue;
    const Seq2SeqMetrics d = decode(part.rows == whole.src.shape[0] ? whole : padded_rows(whole, part), greedy, false);
    m.exact += d.exact;
    m.sequences += d.sequences;
    m.decode_s += d.decode_s;
  }
  if (ranks.size() > 1) {
    SequenceMetrics& t = m.teacher;
    std::vector<double> v{t.loss_sum, static_cast<double>(t.tokens), static_cast<double>(t.correct_tokens),
                          static_cast<double>(t.sequences), static_cast<double>(t.correct_sequences),
                          static_cast<double>(m.sequences), static_cast<double>(m.exact)};
    ranks.sum(v);  // counts below 2^53 add exactly in double
    t = {.loss_sum = v[0], .tokens = static_cast<int64_t>(v[1]), .correct_tokens = static_cast<int64_t>(v[2]),
         .sequences = static_cast<int64_t>(v[3]), .correct_sequences = static_cast<int64_t>(v[4])};
    m.sequences = static_cast<int64_t>(v[5]);
    m.exact = static_cast<int64_t>(v[6]);
  }
  last_ = m;
  return accuracy_evaluation(m.teacher.loss(), m.teacher.token_accuracy(), m.exact_accuracy(), " (teacher-forced)",
                             "greedy exact", " of " + std::to_string(m.sequences));
}

std::map<std::string, std::string> Seq2SeqJob::metadata() const {
  return {{"model", seq2seq_options_to_json(model_.options())},
          {"task", seq2seq_task_options_to_json(task_.options())}};
}

}  // namespace ag
