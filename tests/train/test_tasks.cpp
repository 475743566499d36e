// Toy sequence tasks: the transforms, batches as a pure function of (seed, index), held-out
// separation, option validation and JSON round trip, and the evaluation metrics.
#include <cmath>
#include <limits>

#include "attograd/models/toy/sequence_options.h"
#include "attograd/models/toy/sequence_tasks.h"
#include "support.h"

namespace ag::testing {
namespace {

SequenceTask make_task(SequenceTaskKind kind, int64_t shift = 1) {
  return SequenceTask({.kind = kind, .vocab_size = 10, .seq_len = 5, .batch_size = 4, .shift = shift, .seed = 1});
}

std::vector<int64_t> row(const Indices& x, int64_t r) {
  const int64_t t = x.shape[1];
  return std::vector<int64_t>(x.data.begin() + r * t, x.data.begin() + (r + 1) * t);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sequence_tasks)

BOOST_AUTO_TEST_CASE(transforms_of_a_known_sequence) {
  const std::vector<int64_t> in = {3, 1, 4, 1, 5};
  BOOST_TEST(make_task(SequenceTaskKind::copy).transform(in) == in);
  BOOST_TEST(make_task(SequenceTaskKind::reverse).transform(in) == (std::vector<int64_t>{5, 1, 4, 1, 3}));
  BOOST_TEST(make_task(SequenceTaskKind::sort).transform(in) == (std::vector<int64_t>{1, 1, 3, 4, 5}));
  // Rotation right by k, as numpy.roll(in, k).
  BOOST_TEST(make_task(SequenceTaskKind::shift, 2).transform(in) == (std::vector<int64_t>{1, 5, 3, 1, 4}));
  BOOST_TEST(make_task(SequenceTaskKind::shift, 4).transform(in) == (std::vector<int64_t>{1, 4, 1, 5, 3}));
  AG_CHECK_THROWS_WITH(make_task(SequenceTaskKind::copy).transform(std::vector<int64_t>{1, 2}), std::invalid_argument,
                       "length 2", "seq_len is 5");
}

BOOST_AUTO_TEST_CASE(batches_have_the_documented_shape_range_and_targets) {
  for (SequenceTaskKind kind : {SequenceTaskKind::copy, SequenceTaskKind::reverse, SequenceTaskKind::sort, SequenceTaskKind::shift}) {
    const SequenceTask task({.kind = kind, .vocab_size = 6, .seq_len = 7, .batch_size = 5, .shift = 3, .seed = 2});
    for (const SequenceBatch& b : {task.train_batch(0), task.eval_batch(3)}) {
      BOOST_TEST(b.inputs.shape == Shape({5, 7}));
      BOOST_TEST(b.targets.shape == Shape({5, 7}));
      for (int64_t v : b.inputs.data) BOOST_TEST((v >= 0 && v < 6));
      for (int64_t r = 0; r < 5; ++r) BOOST_TEST(row(b.targets, r) == task.transform(row(b.inputs, r)));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_batch_is_a_pure_function_of_seed_and_index) {
  const SequenceTask a({.seed = 7}), b({.seed = 7}), other_seed({.seed = 8});
  BOOST_TEST(a.train_batch(41).inputs.data == b.train_batch(41).inputs.data);
  // Asking for other batches first changes nothing (no hidden stream state): resume-safe.
  (void)b.train_batch(0);
  (void)b.train_batch(1000);
  BOOST_TEST(a.train_batch(41).inputs.data == b.train_batch(41).inputs.data);
  BOOST_TEST(a.train_batch(41).inputs.data != a.train_batch(42).inputs.data);
  BOOST_TEST(a.train_batch(41).inputs.data != other_seed.train_batch(41).inputs.data);
}

BOOST_AUTO_TEST_CASE(held_out_batches_are_separate_and_fixed) {
  // Same number for both seeds: the stream domains still keep the data apart.
  const SequenceTask task({.seed = 5, .eval_seed = 5});
  BOOST_TEST(task.train_batch(0).inputs.data != task.eval_batch(0).inputs.data);
  // The default eval seed does not depend on the training seed.
  const SequenceTask run1({.seed = 1}), run2({.seed = 2});
  BOOST_TEST(run1.eval_batch(0).inputs.data == run2.eval_batch(0).inputs.data);
  BOOST_TEST(run1.train_batch(0).inputs.data != run2.train_batch(0).inputs.data);
  BOOST_TEST(run1.options().eval_seed == kDefaultEvalSeed);
}

BOOST_AUTO_TEST_CASE(tokens_are_spread_over_the_vocabulary) {
  const SequenceTask task({.vocab_size = 8, .seq_len = 16, .batch_size = 64, .seed = 3});
  std::vector<int64_t> counts(8, 0);
  for (uint64_t i = 0; i < 10; ++i) {
    for (int64_t v : task.train_batch(i).inputs.data) ++counts[static_cast<size_t>(v)];
  }
  // 10240 draws, 1280 expected per token; 5 standard deviations is about +-170.
  for (int64_t c : counts) BOOST_TEST(std::abs(c - 1280) < 200, "count " << c);
}

BOOST_AUTO_TEST_CASE(invalid_options_are_named) {
  AG_CHECK_THROWS_WITH(SequenceTask({.vocab_size = 1}), std::invalid_argument, "vocab_size", "[2, ", "got 1");
  AG_CHECK_THROWS_WITH(SequenceTask({.seq_len = 0}), std::invalid_argument, "seq_len", "got 0");
  AG_CHECK_THROWS_WITH(SequenceTask({.batch_size = -3}), std::invalid_argument, "batch_size", "-3");
  AG_CHECK_THROWS_WITH(SequenceTask({.kind = SequenceTaskKind::shift, .seq_len = 6, .shift = 0}), std::invalid_argument,
                       "task shift", "shift 0", "[1, 6)");
  AG_CHECK_THROWS_WITH(SequenceTask({.kind = SequenceTaskKind::shift, .seq_len = 6, .shift = 6}), std::invalid_argument,
                       "shift 6");
  AG_CHECK_THROWS_WITH(SequenceTask({.kind = SequenceTaskKind::shift, .seq_len = 6, .shift = -1}), std::invalid_argument,
                       "shift -1");
  AG_CHECK_THROWS_WITH(SequenceTask({.kind = SequenceTaskKind::shift, .seq_len = 1}), std::invalid_argument, "[1, 1)");
  // shift is ignored by the other tasks.
  BOOST_CHECK_NO_THROW(SequenceTask({.kind = SequenceTaskKind::copy, .seq_len = 1, .shift = 0}));
}

BOOST_AUTO_TEST_CASE(task_names_round_trip) {
  for (SequenceTaskKind k : {SequenceTaskKind::copy, SequenceTaskKind::reverse, SequenceTaskKind::sort, SequenceTaskKind::shift}) {
    BOOST_TEST((parse_sequence_task_kind(sequence_task_name(k)) == k));
  }
  AG_CHECK_THROWS_WITH(parse_sequence_task_kind("rotate"), std::invalid_argument, "'rotate'", "copy, reverse, sort or shift");
}

BOOST_AUTO_TEST_CASE(options_json_round_trip) {
  const SequenceTaskOptions o{.kind = SequenceTaskKind::shift, .vocab_size = 12, .seq_len = 9, .batch_size = 3, .shift = 4,
                      .seed = std::numeric_limits<uint64_t>::max(), .eval_seed = 77};
  const std::string text = sequence_task_options_to_json(o);
  BOOST_TEST(text.find("\"task\":\"shift\"") != std::string::npos, text);
  const SequenceTaskOptions back = sequence_task_options_from_json(text);
  BOOST_TEST((back.kind == SequenceTaskKind::shift));
  BOOST_TEST(back.vocab_size == 12);
  BOOST_TEST(back.seq_len == 9);
  BOOST_TEST(back.batch_size == 3);
  BOOST_TEST(back.shift == 4);
  BOOST_TEST(back.seed == std::numeric_limits<uint64_t>::max());
  BOOST_TEST(back.eval_seed == 77u);
  // Same options, same data.
  BOOST_TEST(SequenceTask(back).train_batch(3).inputs.data == SequenceTask(o).train_batch(3).inputs.data);
}

BOOST_AUTO_TEST_CASE(options_json_errors) {
  const std::string good = sequence_task_options_to_json({});
  AG_CHECK_THROWS_WITH(sequence_task_options_from_json("{"), std::invalid_argument, "sequence_task_options_from_json", "json");
  AG_CHECK_THROWS_WITH(sequence_task_options_from_json("[1]"), std::invalid_argument, "expected an object");
  // A misspelt key is named as unknown before anything is read; a key left out is named as missing.
  std::string misspelt = good;
  misspelt.replace(misspelt.find("\"seq_len\""), 9, "\"seqlen\"");
  AG_CHECK_THROWS_WITH(sequence_task_options_from_json(misspelt), std::invalid_argument, "unknown field \"seqlen\"");
  std::string missing = good;
  const size_t at = missing.find("\"seq_len\"");
  missing.erase(at, missing.find(',', at) + 1 - at);
  AG_CHECK_THROWS_WITH(sequence_task_options_from_json(missing), std::invalid_argument, "missing \"seq_len\"");
  AG_CHECK_THROWS_WITH(sequence_task_options_from_json(good.substr(0, good.size() - 1) + ",\"extra\":1}"), std::invalid_argument,
                       "unknown field \"extra\"");
  std::string bad_vocab = good;
  bad_vocab.replace(bad_vocab.find("\"vocab_size\":16"), 15, "\"vocab_size\":1");
  AG_CHECK_THROWS_WITH(sequence_task_options_from_json(bad_vocab), std::invalid_argument, "vocab_size", "got 1");
  std::string bad_seed = good;
  bad_seed.replace(bad_seed.find("\"seed\":0"), 8, "\"seed\":-4");
  AG_CHECK_THROWS_WITH(sequence_task_options_from_json(bad_seed), std::invalid_argument, "seed", "-4");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sequence_metric_values)

BOOST_AUTO_TEST_CASE(accuracy_and_loss_by_hand) {
  // B = 2, T = 2, V = 3. Row 0 is predicted right at both positions, row 1 at one of two.
  const Tensor logits = from_vector(std::vector<double>{2, 0, 0,   0, 1, 0,  //
                                                        0, 0, 3,   1, 0, 0},
                                    {2, 2, 3}, DType::f64);
  const Indices targets(Shape{2, 2}, {0, 1, 2, 2});
  const SequenceMetrics m = sequence_metrics(logits, targets);
  BOOST_TEST(m.tokens == 4);
  BOOST_TEST(m.correct_tokens == 3);
  BOOST_TEST(m.sequences == 2);
  BOOST_TEST(m.correct_sequences == 1);
  BOOST_TEST(m.token_accuracy() == 0.75);
  BOOST_TEST(m.sequence_accuracy() == 0.5);
  // -log softmax at the targets: [2,0,0]->0, [0,1,0]->1, [0,0,3]->2, [1,0,0]->2.
  const double lse2 = std::log(std::exp(2.0) + 2), lse1 = std::log(std::exp(1.0) + 2), lse3 = std::log(std::exp(3.0) + 2);
  const double expected = ((lse2 - 2) + (lse1 - 1) + (lse3 - 3) + (lse1 - 0)) / 4;
  BOOST_TEST(m.loss() == expected, boost::test_tools::tolerance(1e-14));
}

BOOST_AUTO_TEST_CASE(counts_add_over_batches) {
  const Tensor right = from_vector(std::vector<double>{5, 0, 0, 5}, {1, 2, 2}, DType::f32);
  SequenceMetrics total;
  total += sequence_metrics(right, Indices(Shape{1, 2}, {0, 1}));
  total += sequence_metrics(right, Indices(Shape{1, 2}, {1, 1}));
  BOOST_TEST(total.tokens == 4);
  BOOST_TEST(total.token_accuracy() == 0.75);
  BOOST_TEST(total.sequence_accuracy() == 0.5);
  BOOST_TEST(SequenceMetrics{}.loss() == 0.0);
  BOOST_TEST(SequenceMetrics{}.sequence_accuracy() == 0.0);
}

BOOST_AUTO_TEST_CASE(ties_go_to_the_first_class) {
  const Tensor tied = from_vector(std::vector<double>{1, 1, 0, 0, 2, 2}, {1, 2, 3}, DType::f64);
  BOOST_TEST(predict_tokens(tied).data == (std::vector<int64_t>{0, 1}));
  BOOST_TEST(sequence_metrics(tied, Indices(Shape{1, 2}, {0, 1})).correct_tokens == 2);
  BOOST_TEST(sequence_metrics(tied, Indices(Shape{1, 2}, {1, 2})).correct_tokens == 0);
}

BOOST_AUTO_TEST_CASE(predictions_read_non_contiguous_logits) {
  // (T, B, V) transposed to (B, T, V): a view with non-trivial strides.
  const Tensor tbv = from_vector(std::vector<double>{0, 9, 0, 8, 0, 0,  //
                                                     0, 0, 7, 0, 6, 0},
                                 {2, 2, 3}, DType::f64);
  const Tensor btv = tbv.transpose(0, 1);
  BOOST_TEST(!btv.is_contiguous());
  BOOST_TEST(predict_tokens(btv).data == (std::vector<int64_t>{1, 2, 0, 1}));
  BOOST_TEST(sequence_metrics(btv, Indices(Shape{2, 2}, {1, 2, 0, 1})).correct_sequences == 2);
}

BOOST_AUTO_TEST_CASE(mismatches_are_named) {
  const Tensor logits = zeros({2, 3, 4}, DType::f32);
  AG_CHECK_THROWS_WITH(sequence_metrics(logits, Indices(Shape{3, 2}, std::vector<int64_t>(6, 0))), std::invalid_argument,
                       "sequence_metrics", "(2, 3, 4)", "(3, 2)");
  AG_CHECK_THROWS_WITH(sequence_metrics(logits, Indices(Shape{2, 3}, {0, 1, 2, 3, 4, 0})), std::invalid_argument,
                       "target 4", "(1, 1)", "[0, 4)");
  AG_CHECK_THROWS_WITH(sequence_metrics(zeros({6, 4}), Indices(Shape{6}, std::vector<int64_t>(6, 0))),
                       std::invalid_argument, "(B, T, V)", "(6, 4)");
  AG_CHECK_THROWS_WITH(predict_tokens(zeros({6, 4})), std::invalid_argument, "predict_tokens", "(6, 4)");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
