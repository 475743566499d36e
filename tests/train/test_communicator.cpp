// Communicator in a process that mpirun did not start (and in a build without MPI): a world of
// one, where every collective leaves its data as it is. Across real ranks: tests/mpi/.
#include "attograd/train/dist/communicator.h"
#include "support.h"

namespace ag::testing {

BOOST_AUTO_TEST_SUITE(communicator)

BOOST_AUTO_TEST_CASE(a_process_started_without_mpirun_is_a_world_of_one) {
  Communicator& comm = Communicator::world();
  BOOST_TEST(&comm == &Communicator::world());
  BOOST_TEST(comm.size() == 1);
  BOOST_TEST(comm.rank() == 0);
  BOOST_TEST(comm.is_root());
}

BOOST_AUTO_TEST_CASE(collectives_of_one_leave_the_data_as_it_is) {
  Communicator& comm = Communicator::world();
  Tensor t = arange(6, DType::f64).view({2, 3});
  const std::vector<double> before = t.to_vector();
  comm.all_reduce_sum(t);
  BOOST_TEST(t.to_vector() == before, boost::test_tools::per_element());
  {
    Communicator::Pending p = comm.start_all_reduce_sum(t);
    p.wait();
    BOOST_TEST(p.done());
  }
  comm.broadcast(t);
  BOOST_TEST(t.to_vector() == before, boost::test_tools::per_element());
  std::string s = "unchanged";
  comm.broadcast(s);
  BOOST_TEST(s == "unchanged");
  comm.barrier();
}

BOOST_AUTO_TEST_CASE(a_tensor_that_is_not_contiguous_or_not_defined_is_refused_by_name) {
  Communicator& comm = Communicator::world();
  Tensor strided = Tensor({4, 3}, DType::f32).t();
  AG_CHECK_THROWS_WITH(comm.all_reduce_sum(strided), std::invalid_argument, "all_reduce_sum", "(3, 4)", "contiguous");
  AG_CHECK_THROWS_WITH((void)comm.start_all_reduce_sum(strided), std::invalid_argument, "start_all_reduce_sum");
  Tensor undefined;
  AG_CHECK_THROWS_WITH(comm.broadcast(undefined), std::invalid_argument, "broadcast", "undefined");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
