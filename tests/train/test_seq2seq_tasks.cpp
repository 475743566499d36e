// Variable-length seq2seq tasks: every example of a batch is right (addition checked by
// arithmetic on the decoded numbers), lengths vary over the whole range, padding and the
// bos / eos framing, batches as a pure function of (seed, index, train/eval), the metrics over
// real tokens only, bad options, and a Seq2Seq that consumes a batch.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "attograd.h"
#include "attograd/models/seq2seq/seq2seq.h"
#include "attograd/models/seq2seq/seq2seq_tasks.h"
#include "support.h"

namespace ag::testing {
namespace {

std::vector<int64_t> row(const Indices& x, int64_t r, int64_t length) {
  const int64_t t = x.shape[1];
  return std::vector<int64_t>(x.data.begin() + r * t, x.data.begin() + r * t + length);
}

// Digit tokens to a number, written independently of the task's code.
int64_t number(const std::string& text) { return std::stoll(text); }

}  // namespace

BOOST_AUTO_TEST_SUITE(seq2seq_tasks)

BOOST_AUTO_TEST_CASE(every_example_is_framed_padded_and_correct) {
  for (const Seq2SeqTaskKind kind : {Seq2SeqTaskKind::addition, Seq2SeqTaskKind::reverse_var, Seq2SeqTaskKind::sort_var,
                                     Seq2SeqTaskKind::dedup}) {
    BOOST_TEST_CONTEXT(seq2seq_task_name(kind)) {
      const Seq2SeqTask task({.kind = kind, .symbols = 5, .min_len = 1, .max_len = 8, .batch_size = 256, .seed = 3});
      const Seq2SeqBatch b = task.train_batch(0);
      const int64_t B = 256, S = b.src.shape[1], T = b.tgt_in.shape[1];
      BOOST_TEST(b.src.shape[0] == B);
      BOOST_TEST(b.tgt_out.shape == b.tgt_in.shape);
      BOOST_TEST(S == *std::max_element(b.src_lengths.begin(), b.src_lengths.end()));  // padded to the longest
      BOOST_TEST(T == *std::max_element(b.tgt_lengths.begin(), b.tgt_lengths.end()));
      BOOST_TEST(S <= task.max_source_len());
      BOOST_TEST(T <= task.max_target_len() + 1);
      std::set<int64_t> src_lengths;
      int64_t shorter = 0;
      for (int64_t r = 0; r < B; ++r) {
        const int64_t s = b.src_lengths[static_cast<size_t>(r)], t = b.tgt_lengths[static_cast<size_t>(r)];
        src_lengths.insert(s);
        const std::vector<int64_t> src = row(b.src, r, s), in = row(b.tgt_in, r, t), out = row(b.tgt_out, r, t);
        const std::vector<int64_t> y(out.begin(), out.end() - 1);
        BOOST_TEST(in.front() == kBosToken);
        BOOST_TEST(out.back() == kEosToken);
        BOOST_TEST(std::equal(y.begin(), y.end(), in.begin() + 1));  // tgt_in is tgt_out shifted right
        for (int64_t i = s; i < S; ++i) BOOST_TEST(b.src.data[static_cast<size_t>(r * S + i)] == kPadToken);
        for (int64_t i = t; i < T; ++i) {
          BOOST_TEST(b.tgt_in.data[static_cast<size_t>(r * T + i)] == kPadToken);
          BOOST_TEST(b.tgt_out.data[static_cast<size_t>(r * T + i)] == kSeq2SeqIgnore);
        }
        for (int64_t v : src) BOOST_TEST((v >= kFirstContentToken && v < task.vocab_size()));
        const std::string text = task.to_text(src), answer = task.to_text(y);
        switch (kind) {
          case Seq2SeqTaskKind::addition: {
            const size_t plus = text.find('+');
            BOOST_REQUIRE(plus != std::string::npos);
            BOOST_TEST(number(answer) == number(text.substr(0, plus)) + number(text.substr(plus + 1)), text);
            BOOST_TEST(std::to_string(number(answer)) == answer);  // no leading zeros
            src_lengths.insert(100 + static_cast<int64_t>(plus));  // digits of the first operand
            break;
          }
          case Seq2SeqTaskKind::reverse_var:
            BOOST_TEST(std::equal(y.begin(), y.end(), src.rbegin(), src.rend()));
            break;
          case Seq2SeqTaskKind::sort_var:
            BOOST_TEST(std::is_sorted(y.begin(), y.end()));
            BOOST_TEST(std::is_permutation(y.begin(), y.end(), src.begin(), src.end()));
            break;
          case Seq2SeqTaskKind::dedup: {
            // Walk the source: each run of equal symbols is one output symbol.
            size_t k = 0;
            for (size_t i = 0; i < src.size(); ++i) {
              if (i == 0 || src[i] != src[i - 1]) {
                BOOST_REQUIRE(k < y.size());
                BOOST_TEST(y[k++] == src[i]);
              }
            }
            BOOST_TEST(k == y.size());
            shorter += y.size() < src.size() ? 1 : 0;
            break;
          }
        }
      }
      if (kind == Seq2SeqTaskKind::addition) {
        BOOST_TEST(src_lengths.count(101) == 1u);  // one-digit and eight-digit first operands
        BOOST_TEST(src_lengths.count(108) == 1u);
      } else {
        BOOST_TEST(src_lengths.count(1) == 1u);
        BOOST_TEST(src_lengths.count(8) == 1u);
      }
      if (kind == Seq2SeqTaskKind::dedup) BOOST_TEST(shorter > B / 2);
    }
  }
}

BOOST_AUTO_TEST_CASE(batches_are_a_function_of_seed_index_and_split) {
  const Seq2SeqTaskOptions o{.kind = Seq2SeqTaskKind::reverse_var, .max_len = 12, .batch_size = 16, .seed = 5};
  const Seq2SeqTask a(o), b(o);
  BOOST_TEST(a.train_batch(7).src.data == b.train_batch(7).src.data);
  BOOST_TEST(a.train_batch(7).src_lengths == b.train_batch(7).src_lengths);
  BOOST_TEST(a.train_batch(7).src.data != a.train_batch(8).src.data);
  BOOST_TEST(a.train_batch(7).src.data != a.eval_batch(7).src.data);
  Seq2SeqTaskOptions other = o;
  other.seed = 6;
  BOOST_TEST(Seq2SeqTask(other).train_batch(7).src.data != a.train_batch(7).src.data);
  BOOST_TEST(Seq2SeqTask(other).eval_batch(7).src.data == a.eval_batch(7).src.data);  // same held-out set
}

BOOST_AUTO_TEST_CASE(metrics_count_real_tokens_only) {
  // Two targets: (5, eos) and (4, 4, eos); logits that get row 0 right and row 1 wrong at t=1.
  const Seq2SeqBatch b = pad_batch({{{3}, {5}}, {{3, 4}, {4, 4}}});
  BOOST_TEST(b.tgt_out.data == (std::vector<int64_t>{5, kEosToken, kSeq2SeqIgnore, 4, 4, kEosToken}));
  BOOST_TEST(b.tgt_in.data == (std::vector<int64_t>{kBosToken, 5, kPadToken, kBosToken, 4, 4}));
  BOOST_TEST(b.src.data == (std::vector<int64_t>{3, kPadToken, 3, 4}));
  Tensor logits = zeros({2, 3, 6}, DType::f64);
  const auto hot = [&](int64_t r, int64_t t, int64_t v) { logits.select(0, r).select(0, t).select(0, v).fill_(5.0); };
  hot(0, 0, 5);
  hot(0, 1, kEosToken);
  hot(0, 2, 1);  // the padded position predicts anything: not counted
  hot(1, 0, 4);
  hot(1, 1, 3);  // wrong
  hot(1, 2, kEosToken);
  const SequenceMetrics m = seq2seq_metrics(logits, b.tgt_out);
  BOOST_TEST(m.tokens == 5);
  BOOST_TEST(m.correct_tokens == 4);
  BOOST_TEST(m.sequences == 2);
  BOOST_TEST(m.correct_sequences == 1);
  // The loss is cross_entropy's over the same tokens.
  const double ce = cross_entropy(Variable(logits), b.tgt_out, {.ignore_index = kSeq2SeqIgnore}).item();
  BOOST_TEST(std::abs(m.loss() - ce) < 1e-12);
  AG_CHECK_THROWS_WITH(seq2seq_metrics(logits, b.src), std::invalid_argument, "seq2seq_metrics", "(2, 3, 6)", "(2, 2)");
}

BOOST_AUTO_TEST_CASE(a_seq2seq_trains_on_a_batch) {
  const Seq2SeqTask task({.kind = Seq2SeqTaskKind::addition, .min_len = 1, .max_len = 3, .batch_size = 8});
  manual_seed(4);
  Seq2Seq model({.src_vocab = task.vocab_size(), .max_len = task.max_source_len(), .d_model = 16, .n_head = 2,
                 .d_ff = 32, .n_encoder_layers = 1, .n_decoder_layers = 1, .dropout = 0.0});
  const Seq2SeqBatch b = task.train_batch(0);
  const Variable loss = cross_entropy(model(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths), b.tgt_out);
  BOOST_TEST(std::isfinite(loss.item()));
  loss.backward();
  BOOST_TEST(model.src_embed().weight().grad().defined());
}

BOOST_AUTO_TEST_CASE(bad_options_name_the_task_and_the_value) {
  AG_CHECK_THROWS_WITH(Seq2SeqTask({.kind = Seq2SeqTaskKind::addition, .max_len = 19}), std::invalid_argument,
                       "task addition", "max_len", "got 19");
  AG_CHECK_THROWS_WITH(Seq2SeqTask({.kind = Seq2SeqTaskKind::dedup, .min_len = 4, .max_len = 3}),
                       std::invalid_argument, "task dedup", "max_len", "[4, ", "got 3");
  AG_CHECK_THROWS_WITH(Seq2SeqTask({.kind = Seq2SeqTaskKind::sort_var, .symbols = 0}), std::invalid_argument,
                       "task sort-var", "symbols", "got 0");
  AG_CHECK_THROWS_WITH(Seq2SeqTask({.batch_size = 0}), std::invalid_argument, "batch_size", "got 0");
  AG_CHECK_THROWS_WITH(parse_seq2seq_task_kind("add"), std::invalid_argument, "'add'", "reverse-var");
  BOOST_TEST(std::string(seq2seq_task_name(parse_seq2seq_task_kind("sort-var"))) == "sort-var");
  const Seq2SeqTask add({.kind = Seq2SeqTaskKind::addition});
  AG_CHECK_THROWS_WITH(add.transform(std::vector<int64_t>{4, 5}), std::invalid_argument, "<digits>+<digits>");
  AG_CHECK_THROWS_WITH(add.transform(std::vector<int64_t>{4, 1}), std::invalid_argument, "source token 1");
  AG_CHECK_THROWS_WITH(pad_batch({{{}, {3}}}), std::invalid_argument, "pad_batch", "empty source");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
