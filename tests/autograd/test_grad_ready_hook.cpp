// Variable::set_grad_ready_hook: a leaf's hook runs once per backward pass, after the last
// gradient of that pass has been added, while nodes further down the graph have not run yet.
// Data-parallel training (train/dist/data_parallel.h) starts its gradient sums there.
#include <string>
#include <vector>

#include "support.h"

namespace ag::testing {
namespace {

Variable leaf(const std::vector<double>& v, const std::string& name) {
  return Variable(from_vector(v, {static_cast<int64_t>(v.size())}, DType::f64), true, name);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grad_ready_hook)

BOOST_AUTO_TEST_CASE(hook_sees_the_final_gradient_once_per_pass) {
  // w is used by two nodes: the hook must wait for both contributions.
  Variable w = leaf({1, 2}, "w");
  std::vector<std::vector<double>> seen;
  w.set_grad_ready_hook([&](const Variable& v) { seen.push_back(v.grad().to_vector()); });
  Variable y = add(sum(mul(w, 3.0)), sum(mul(w, w)));  // dy/dw = 3 + 2w
  y.backward();
  BOOST_TEST_REQUIRE(seen.size() == 1u);
  BOOST_TEST(seen[0] == (std::vector<double>{5, 7}));
  // A second pass adds to the gradient and calls the hook again, with the accumulated value.
  sum(mul(w, 1.0)).backward();
  BOOST_TEST_REQUIRE(seen.size() == 2u);
  BOOST_TEST(seen[1] == (std::vector<double>{6, 8}));
}

BOOST_AUTO_TEST_CASE(hooks_run_in_the_order_gradients_become_final) {
  // loss = sum(tanh(a * x) * b): b's gradient is final after the first node, a's only after
  // the deeper mul has run. The hooks must come in that order, each while the other is pending.
  Variable x = Variable(from_vector(std::vector<double>{0.5, -1.0}, {2}, DType::f64), false, "x");
  Variable a = leaf({2, 3}, "a");
  Variable b = leaf({4, 5}, "b");
  std::vector<std::string> order;
  bool a_had_grad_when_b_ready = true;
  a.set_grad_ready_hook([&](const Variable& v) { order.push_back(v.name()); });
  b.set_grad_ready_hook([&](const Variable& v) {
    order.push_back(v.name());
    a_had_grad_when_b_ready = a.grad().defined();
  });
  sum(mul(tanh(mul(a, x)), b)).backward();
  BOOST_TEST(order == (std::vector<std::string>{"b", "a"}), boost::test_tools::per_element());
  BOOST_TEST(!a_had_grad_when_b_ready);
  BOOST_TEST(a.grad().defined());
}

BOOST_AUTO_TEST_CASE(no_call_for_a_leaf_the_pass_does_not_reach_or_after_removal) {
  Variable used = leaf({1}, "used");
  Variable unused = leaf({1}, "unused");
  int calls_used = 0, calls_unused = 0;
  used.set_grad_ready_hook([&](const Variable&) { ++calls_used; });
  unused.set_grad_ready_hook([&](const Variable&) { ++calls_unused; });
  sum(mul(used, 2.0)).backward();
  BOOST_TEST(calls_used == 1);
  BOOST_TEST(calls_unused == 0);
  used.set_grad_ready_hook({});
  sum(mul(used, 2.0)).backward();
  BOOST_TEST(calls_used == 1);
}

BOOST_AUTO_TEST_CASE(a_leaf_root_calls_its_hook) {
  Variable s = Variable(from_vector(std::vector<double>{3}, {1}, DType::f64), true, "s");
  int calls = 0;
  s.set_grad_ready_hook([&](const Variable& v) { calls += v.grad().at({0}) == 1.0 ? 1 : 100; });
  s.backward();
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(a_leaf_that_is_a_root_and_reached_from_another_root_is_announced_once) {
  Variable s = Variable(from_vector(std::vector<double>{3}, {1}, DType::f64), true, "s");
  std::vector<double> seen;
  s.set_grad_ready_hook([&](const Variable& v) { seen.push_back(v.grad().at({0})); });
  run_backward({s, sum(mul(s, 2.0))}, {Tensor(), Tensor()}, false);
  BOOST_TEST_REQUIRE(seen.size() == 1u);
  BOOST_TEST(seen[0] == 3.0);  // 1 from the seed + 2 through the other root
}

BOOST_AUTO_TEST_CASE(hook_on_a_non_leaf_is_refused) {
  Variable w = leaf({1, 2}, "w");
  Variable y = mul(w, 2.0);
  BOOST_CHECK_THROW(y.set_grad_ready_hook([](const Variable&) {}), std::logic_error);
}

BOOST_AUTO_TEST_CASE(an_exception_from_a_hook_leaves_backward) {
  Variable w = leaf({1, 2}, "w");
  w.set_grad_ready_hook([](const Variable&) { throw std::runtime_error("hook failed"); });
  BOOST_CHECK_THROW(sum(mul(w, 2.0)).backward(), std::runtime_error);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
