// Losses: mse_loss values and float64 gradient checks (inputs and targets, transposed views,
// broadcast targets), and cross_entropy as the trainer uses it on sequence logits.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include "attograd/models/toy/sequence_tasks.h"
#include "attograd/train/losses.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

const std::vector<Reduction> kReductions = {Reduction::mean, Reduction::sum, Reduction::none};

// Reduces an elementwise result to one element for gradcheck (none returns a tensor).
Variable to_scalar(const Variable& v, Reduction r) { return r == Reduction::none ? sum(v * v) : v; }

}  // namespace
}  // namespace ag::testing

namespace ag {
// For Boost.Test's data-driven case names (found by argument-dependent lookup).
inline std::ostream& operator<<(std::ostream& os, Reduction r) {
  return os << (r == Reduction::mean ? "mean" : r == Reduction::sum ? "sum" : "none");
}
}  // namespace ag

namespace ag::testing {

BOOST_AUTO_TEST_SUITE(mse)

BOOST_AUTO_TEST_CASE(values_for_each_reduction) {
  const Variable x(from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}, DType::f64));
  const Variable y(from_vector(std::vector<double>{0, 2, 5, 1}, {2, 2}, DType::f64));
  // Squared errors 1, 0, 4, 9.
  BOOST_TEST(mse_loss(x, y).item() == 3.5);
  BOOST_TEST(mse_loss(x, y, Reduction::sum).item() == 14.0);
  const Variable none = mse_loss(x, y, Reduction::none);
  BOOST_TEST(none.shape() == Shape({2, 2}));
  BOOST_TEST(none.value().to_vector() == (std::vector<double>{1, 0, 4, 9}));
}

BOOST_AUTO_TEST_CASE(gradient_of_mean_is_two_diff_over_n) {
  Variable x(from_vector(std::vector<double>{1, 2, 3, 4}, {4}, DType::f64), true);
  Variable y(from_vector(std::vector<double>{0, 2, 5, 1}, {4}, DType::f64), true);
  mse_loss(x, y).backward();
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{0.5, 0.0, -1.0, 1.5}));
  BOOST_TEST(y.grad().to_vector() == (std::vector<double>{-0.5, 0.0, 1.0, -1.5}));
}

BOOST_DATA_TEST_CASE(gradcheck_input_and_target, bdata::make(kReductions), reduction) {
  const Variable x = randn_leaf({3, 4}, 11, "x");
  const Variable y = randn_leaf({3, 4}, 12, "y");
  check_gradients([reduction](const std::vector<Variable>& in) { return to_scalar(mse_loss(in[0], in[1], reduction), reduction); },
                  {x, y});
}

BOOST_DATA_TEST_CASE(gradcheck_transposed_input, bdata::make(kReductions), reduction) {
  // The leaf is (4, 3); the loss sees its transposed view (3, 4), non-contiguous.
  const Variable x = randn_leaf({4, 3}, 21, "x");
  const Variable y = randn_leaf({3, 4}, 22, "y");
  check_gradients(
      [reduction](const std::vector<Variable>& in) {
        return to_scalar(mse_loss(transpose(in[0], 0, 1), in[1], reduction), reduction);
      },
      {x, y});
}

BOOST_DATA_TEST_CASE(gradcheck_broadcast_target, bdata::make(kReductions), reduction) {
  // One target row for every input row: the target gradient sums over the broadcast axis.
  const Variable x = randn_leaf({2, 3, 4}, 31, "x");
  const Variable row = randn_leaf({4}, 32, "row");
  check_gradients(
      [reduction](const std::vector<Variable>& in) {
        return to_scalar(mse_loss(in[0], broadcast_to(in[1], {2, 3, 4}), reduction), reduction);
      },
      {x, row});
}

BOOST_AUTO_TEST_CASE(gradcheck_masked_input) {
  // Masked positions are replaced by a constant before the loss: no gradient reaches them.
  const Variable x = randn_leaf({3, 4}, 41, "x");
  const Variable y = randn_leaf({3, 4}, 42, "y");
  const Tensor mask = from_vector(std::vector<double>{1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1}, {3, 4}, DType::f64);
  check_gradients([mask](const std::vector<Variable>& in) { return mse_loss(masked_fill(in[0], mask, 0.0), in[1]); },
                  {x, y});
  Variable xg = randn_leaf({3, 4}, 41, "x");
  mse_loss(masked_fill(xg, mask, 0.0), y.detach()).backward();
  BOOST_TEST(xg.grad().at({0, 0}) == 0.0);
  BOOST_TEST(xg.grad().at({0, 1}) != 0.0);
}

BOOST_AUTO_TEST_CASE(mismatched_operands_are_named) {
  const Variable a(zeros({2, 3}, DType::f64)), b(zeros({3}, DType::f64)), c(zeros({2, 3}, DType::f32));
  AG_CHECK_THROWS_WITH(mse_loss(a, b), std::invalid_argument, "mse_loss", "(2, 3)", "(3,)");
  AG_CHECK_THROWS_WITH(mse_loss(a, c), std::invalid_argument, "mse_loss", "f64", "f32");
  AG_CHECK_THROWS_WITH(mse_loss(a, Variable()), std::invalid_argument, "mse_loss", "undefined");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cross_entropy_for_sequences)

BOOST_AUTO_TEST_CASE(matches_the_evaluation_loss_of_a_task_batch) {
  // The trainer's loss (cross_entropy on (B, T, V)) and the evaluation loss (sequence_metrics)
  // are the same number.
  const SequenceTask task({.kind = SequenceTaskKind::sort, .vocab_size = 7, .seq_len = 5, .batch_size = 3, .seed = 4});
  const SequenceBatch batch = task.train_batch(0);
  Generator gen(9);
  const Variable logits(normal({3, 5, 7}, 0.0, 2.0, gen, DType::f64), true);
  const Variable loss = cross_entropy(logits, batch.targets);
  const SequenceMetrics m = sequence_metrics(logits.value(), batch.targets);
  BOOST_TEST(loss.item() == m.loss(), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(m.tokens == 15);
}

BOOST_AUTO_TEST_CASE(gradcheck_on_sequence_logits_with_ignored_positions) {
  const Variable logits = randn_leaf({2, 3, 5}, 51, "logits");
  const Indices targets(Shape{2, 3}, {0, 4, -100, 2, -100, 1});
  check_gradients([targets](const std::vector<Variable>& in) { return cross_entropy(in[0], targets); }, {logits});
  check_gradients(
      [](const std::vector<Variable>& in) {
        return cross_entropy(transpose(in[0], 0, 1), Indices(Shape{3, 2}, {0, 2, 4, -100, -100, 1}),
                             {.label_smoothing = 0.1, .reduction = Reduction::sum});
      },
      {logits});
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
