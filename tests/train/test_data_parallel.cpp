// DataParallel in one process: the shards of a global batch, and the bucketed gradient average
// in a world of one (the average of one rank is its own gradient, bit for bit). Across real
// ranks against one process: tests/mpi/dp_check.cpp and run_dp_checks.sh.
#include "attograd/train/dist/data_parallel.h"
#include "attograd/train/losses.h"
#include "support.h"

namespace ag::testing {

BOOST_AUTO_TEST_SUITE(data_parallel)

BOOST_AUTO_TEST_CASE(shards_are_contiguous_and_cover_the_batch) {
  for (int rank = 0; rank < 4; ++rank) {
    const Shard s = shard_of(32, rank, 4, "--batch");
    BOOST_TEST(s.begin == 8 * rank);
    BOOST_TEST(s.rows == 8);
  }
  const Indices x(Shape{4, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Indices rows = shard_rows(x, {.begin = 2, .rows = 2});
  BOOST_TEST(rows.shape == (Shape{2, 3}));
  BOOST_TEST(rows.data == (std::vector<int64_t>{6, 7, 8, 9, 10, 11}), boost::test_tools::per_element());
  BOOST_CHECK_THROW(shard_rows(x, {.begin = 3, .rows = 2}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_batch_that_does_not_split_evenly_is_refused_by_name) {
  try {
    shard_of(30, 0, 4, "--batch");
    BOOST_FAIL("no error");
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find("--batch 30") != std::string::npos);
    BOOST_TEST(m.find("over 4 processes") != std::string::npos);
  }
  BOOST_CHECK_THROW(shard_of(2, 0, 4, "--batch"), std::invalid_argument);  // fewer rows than ranks
  BOOST_CHECK_THROW(shard_of(8, 4, 4, "--batch"), std::invalid_argument);  // no such rank
}

BOOST_AUTO_TEST_CASE(an_uneven_split_is_refused_with_the_process_counts_that_work) {
  // A fresh run may change its batch; a resumed one keeps its checkpoint's, so the advice is
  // only the process counts (a batch-16 checkpoint on 3 processes).
  AG_CHECK_THROWS_WITH(shard_of(30, 0, 4, "--batch"), std::invalid_argument, "-np 1, 2, 3, 5, 6, 10, 15 or 30",
                       "make it a multiple of 4 (e.g. 32)");
  try {
    shard_of(16, 0, 3, "the checkpoint's batch", false);
    BOOST_FAIL("no error");
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find("the checkpoint's batch 16") != std::string::npos, m);
    BOOST_TEST(m.find("run with mpirun -np 1, 2, 4, 8 or 16") != std::string::npos, m);
    BOOST_TEST(m.find("multiple") == std::string::npos, m);
  }
  // A batch with many divisors: the first eight, and that others divide it too.
  AG_CHECK_THROWS_WITH(shard_of(720, 0, 7, "--batch"), std::invalid_argument, "-np 1, 2, 3, 4, 5, 6, 8 or 9 (a count");
}

BOOST_AUTO_TEST_CASE(a_world_of_one_keeps_every_gradient_bit_for_bit_and_starts_buckets_early) {
  manual_seed(5);
  Variable w1(uniform({16, 8}, -1, 1), true, "w1");
  Variable w2(uniform({8, 4}, -1, 1), true, "w2");
  Variable unused(uniform({3}, -1, 1), true, "unused");
  const NamedVariables params{{"unused", unused}, {"w1", w1}, {"w2", w2}};
  const Variable x(uniform({5, 16}, -1, 1), false, "x");
  const auto loss = [&] { return sum(tanh(matmul(tanh(matmul(x, w1)), w2))); };

  loss().backward();
  const std::vector<double> g1 = w1.grad().to_vector(), g2 = w2.grad().to_vector();
  w1.zero_grad();
  w2.zero_grad();
  {
    // 64-byte buckets, in reverse order: {w2}, {w1}, {unused}. w2's sum starts while backward
    // still has w1 ahead of it; unused's bucket only after backward.
    DataParallel dp(params, Communicator::world(), {.bucket_bytes = 64});
    BOOST_TEST(dp.bucket_count() >= 2);
    dp.backward(loss());
    BOOST_TEST(w1.grad().to_vector() == g1, boost::test_tools::per_element());
    BOOST_TEST(w2.grad().to_vector() == g2, boost::test_tools::per_element());
    BOOST_TEST(!unused.grad().defined());  // not reached: stays undefined, the optimizer skips it
    BOOST_TEST(dp.overlap().steps == 1);
    BOOST_TEST(dp.overlap().started_during_backward >= 1);
    BOOST_TEST(dp.mean(3.5) == 3.5);
  }
  // The hooks leave with the DataParallel.
  BOOST_TEST(!w1.impl()->grad_ready_hook);
  BOOST_TEST(!w2.impl()->grad_ready_hook);
}

BOOST_AUTO_TEST_CASE(parameters_must_be_leaves_that_require_grad) {
  Variable frozen(zeros({2}), false, "frozen");
  BOOST_CHECK_THROW(DataParallel({{"frozen", frozen}}, Communicator::world()), std::invalid_argument);
  Variable w(zeros({2}), true, "w");
  BOOST_CHECK_THROW(DataParallel({{"w", w}}, Communicator::world(), {.bucket_bytes = 0}), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
