// The backward engine: accumulation into leaves, retained and freed graphs, diamonds, grad
// mode, detach, deep graphs, anomaly mode, the gradient shape check and what the graph keeps
// alive.
#include <cmath>
#include <limits>
#include <memory>

#include "support.h"

namespace ag::testing {
namespace {

Variable leaf(const std::vector<double>& v, const Shape& shape, const std::string& name = "x") {
  return Variable(from_vector(v, shape, DType::f64), true, name);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine)

BOOST_AUTO_TEST_CASE(backward_accumulates_into_existing_grad) {
  Variable x = leaf({1, 2, 3}, {3});
  x.set_grad(from_vector(std::vector<double>{10, 20, 30}, {3}, DType::f64));
  sum(mul(x, 2.0)).backward();
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{12, 22, 32}));
  // A second, independent graph adds again.
  sum(mul(x, x)).backward();
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{14, 26, 38}));
}

BOOST_AUTO_TEST_CASE(first_gradient_is_owned_by_the_leaf) {
  // The first gradient to arrive is copied: changing it later must not touch what produced it.
  Variable x = leaf({1, 2}, {2});
  Variable y = mul(x, 3.0);
  const Tensor seed = from_vector(std::vector<double>{1, 1}, {2}, DType::f64);
  y.backward(seed);
  x.mutable_grad().fill_(0.0);
  BOOST_TEST(seed.to_vector() == (std::vector<double>{1, 1}));
  // A leaf used as the root gets a copy of the seed too.
  Variable z = leaf({5}, {1});
  const Tensor g = from_vector(std::vector<double>{2}, {1}, DType::f64);
  z.backward(g);
  z.mutable_grad().fill_(7.0);
  BOOST_TEST(g.item() == 2.0);
  z.backward(g);
  BOOST_TEST(z.grad().item() == 9.0);
}

BOOST_AUTO_TEST_CASE(backward_twice_with_retain_graph_doubles_leaf_grads) {
  Variable x = leaf({0.5, -1, 2}, {3});
  Variable w = leaf({3, 4, 5}, {3}, "w");
  Variable y = sum(mul(exp(x), w));
  y.backward(Tensor(), /*retain_graph=*/true);
  const std::vector<double> gx = x.grad().to_vector(), gw = w.grad().to_vector();
  for (size_t i = 0; i < 3; ++i) {
    BOOST_TEST(gw[i] == std::exp(x.value().to_vector()[i]));
    BOOST_TEST(gx[i] == gw[i] * w.value().to_vector()[i]);
  }
  y.backward(Tensor(), /*retain_graph=*/true);
  for (size_t i = 0; i < 3; ++i) {
    BOOST_TEST(x.grad().to_vector()[i] == 2 * gx[i]);
    BOOST_TEST(w.grad().to_vector()[i] == 2 * gw[i]);
  }
  y.backward();  // the last pass may free the graph
  BOOST_TEST(x.grad().to_vector()[0] == 3 * gx[0]);
  AG_CHECK_THROWS_WITH(y.backward(), std::logic_error, "already freed", "'sum'", "retain_graph");
}

BOOST_AUTO_TEST_CASE(backward_through_a_freed_graph_throws_logic_error) {
  Variable x = leaf({1, 2}, {2});
  Variable h = tanh(x);
  Variable y = sum(h);
  y.backward();
  AG_CHECK_THROWS_WITH(y.backward(), std::logic_error, "backward", "'sum'", "already freed");
  // Reaching the freed part from a new root is caught as well, with the name of the freed node.
  Variable z = sum(mul(h, 2.0));
  AG_CHECK_THROWS_WITH(z.backward(), std::logic_error, "'tanh'", "already freed");
}

BOOST_AUTO_TEST_CASE(backward_of_a_non_scalar_needs_a_gradient) {
  Variable x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Variable y = mul(x, 2.0);
  AG_CHECK_THROWS_WITH(y.backward(), std::logic_error, "backward", "non-scalar", "(2, 3)");
  BOOST_TEST(!x.grad().defined());
  y.backward(from_vector(std::vector<double>{1, 0, 0, 0, 0, -1}, {2, 3}, DType::f64));
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{2, 0, 0, 0, 0, -2}));
}

BOOST_AUTO_TEST_CASE(a_value_used_twice_gets_the_summed_gradient) {
  // h = 3x feeds three consumers: y = h*h + h + exp(h) -> dy/dx = 3 (2h + 1 + exp(h)).
  Variable x = leaf({0.1, -0.2}, {2});
  Variable h = mul(x, 3.0);
  Variable y = sum(add(add(mul(h, h), h), exp(h)));
  y.backward();
  const std::vector<double> hv = h.value().to_vector();
  for (size_t i = 0; i < 2; ++i) {
    const double expected = 3 * (2 * hv[i] + 1 + std::exp(hv[i]));
    BOOST_TEST(std::abs(x.grad().to_vector()[i] - expected) <= 1e-14, x.grad().to_vector()[i] << " vs " << expected);
  }
  // A leaf used on both sides of one op.
  Variable z = leaf({1.5}, {1});
  sum(mul(z, z)).backward();
  BOOST_TEST(z.grad().item() == 3.0);
}

BOOST_AUTO_TEST_CASE(no_grad_guard_records_no_graph) {
  Variable x = leaf({1, 2}, {2});
  {
    NoGradGuard guard;
    BOOST_TEST(!grad_enabled());
    Variable y = mul(x, 2.0);
    BOOST_TEST(!y.requires_grad());
    BOOST_TEST(y.is_leaf());
    BOOST_TEST(y.grad_fn() == nullptr);
    BOOST_TEST(y.value().to_vector() == (std::vector<double>{2, 4}));
    {
      NoGradGuard nested;
    }
    BOOST_TEST(!grad_enabled());  // the inner guard restored "off", not "on"
    AG_CHECK_THROWS_WITH(sum(y).backward(), std::logic_error, "does not require grad");
  }
  BOOST_TEST(grad_enabled());
  Variable z = mul(x, 2.0);
  BOOST_TEST(z.requires_grad());
  BOOST_TEST(z.grad_fn() != nullptr);
  BOOST_TEST(z.grad_fn()->name() == "mul_scalar");
}

BOOST_AUTO_TEST_CASE(ops_on_leaves_without_requires_grad_record_nothing) {
  Variable c(from_vector(std::vector<double>{1, 2}, {2}, DType::f64), false);
  Variable y = exp(c);
  BOOST_TEST(!y.requires_grad());
  BOOST_TEST(y.grad_fn() == nullptr);
}

BOOST_AUTO_TEST_CASE(detach_cuts_the_graph) {
  Variable x = leaf({1, 2}, {2});
  Variable h = mul(x, 3.0);
  Variable d = h.detach();
  BOOST_TEST(d.is_leaf());
  BOOST_TEST(!d.requires_grad());
  BOOST_TEST(d.value().shares_storage_with(h.value()));
  // y = d * x: the gradient is d (the path through d is cut), not d + 3x.
  sum(mul(d, x)).backward();
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{3, 6}));
  BOOST_TEST(!d.grad().defined());
}

BOOST_AUTO_TEST_CASE(deep_chain_does_not_overflow_the_stack_and_frees_nodes) {
  constexpr int kDepth = 100000;
  Variable x = leaf({0.5}, {1});
  Variable y = x;
  std::weak_ptr<Node> middle;
  for (int i = 0; i < kDepth; ++i) {
    y = add(y, 1.0);
    if (i == kDepth / 2) middle = y.grad_fn();
  }
  BOOST_TEST(y.item() == 0.5 + kDepth);
  BOOST_TEST(!middle.expired());  // held by the chain above it
  y.backward();
  BOOST_TEST(x.grad().item() == 1.0);
  BOOST_TEST(middle.expired());  // freed as the walk went by
  BOOST_TEST(y.grad_fn()->released());
}

BOOST_AUTO_TEST_CASE(deep_graph_dropped_without_backward_does_not_overflow_the_stack) {
  // Releasing a long chain of nodes must not recurse once per node.
  constexpr int kDepth = 300000;  // a recursive release crashes near 200000 in a release build
  Variable x = leaf({0.5}, {1});
  std::weak_ptr<Node> first;
  {
    Variable y = add(x, 1.0);
    first = y.grad_fn();
    for (int i = 1; i < kDepth; ++i) y = add(y, 1.0);
  }
  BOOST_TEST(first.expired());
  // The same after a pass that retained the graph.
  std::weak_ptr<Node> retained;
  {
    Variable y = mul(x, 1.0);
    retained = y.grad_fn();
    for (int i = 1; i < kDepth; ++i) y = mul(y, 1.0);
    y.backward(Tensor(), /*retain_graph=*/true);
    BOOST_TEST(!retained.expired());
  }
  BOOST_TEST(retained.expired());
  BOOST_TEST(x.grad().item() == 1.0);
}

BOOST_AUTO_TEST_CASE(anomaly_mode_names_the_op_that_produced_a_nan_gradient) {
  // sqrt at 0 has an infinite derivative; times a zero upstream gradient it is 0 * inf = NaN.
  Variable x = leaf({0.0, 4.0}, {2});
  const auto loss = [&] { return sum(mul(sqrt(x), 0.0)); };
  loss().backward();  // without anomaly mode the NaN passes silently
  BOOST_TEST(std::isnan(x.grad().to_vector()[0]));
  x.zero_grad();
  {
    AnomalyGuard guard;
    BOOST_TEST(anomaly_enabled());
    AG_CHECK_THROWS_WITH(loss().backward(), std::runtime_error, "anomaly", "'sqrt'", "(2,)");
  }
  BOOST_TEST(!anomaly_enabled());
  // An op that computes finite gradients is not blamed.
  AnomalyGuard guard;
  Variable y = leaf({1.0, 4.0}, {2});
  sum(sqrt(y)).backward();
  BOOST_TEST(y.grad().to_vector() == (std::vector<double>{0.5, 0.25}));
}

BOOST_AUTO_TEST_CASE(a_custom_op_with_a_wrongly_shaped_gradient_is_caught) {
  Variable x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Variable y = make_result("bad_shape", x.value().clone(), {x}, [](const Tensor&, GradSink& grads) {
    grads.add(0, zeros({3, 2}, DType::f64));
  });
  AG_CHECK_THROWS_WITH(sum(y).backward(), std::logic_error, "'bad_shape'", "(3, 2)", "(2, 3)");
  Variable z = make_result("bad_dtype", x.value().clone(), {x}, [](const Tensor& g, GradSink& grads) {
    grads.add(0, g.to(DType::f32));
  });
  AG_CHECK_THROWS_WITH(sum(z).backward(), std::logic_error, "'bad_dtype'", "f32", "f64");
  Variable w = make_result("bad_index", x.value().clone(), {x}, [](const Tensor& g, GradSink& grads) {
    grads.add(1, g);
  });
  AG_CHECK_THROWS_WITH(sum(w).backward(), std::logic_error, "'bad_index'", "input 1", "1 inputs");
}

BOOST_AUTO_TEST_CASE(a_custom_op_joins_the_graph_through_make_result) {
  // y = 5x written from outside the library; only the inputs that need a gradient are wanted.
  Variable x = leaf({1, 2}, {2});
  Variable c(ones({2}, DType::f64), false);
  bool wanted_constant = true;
  Variable y = make_result("scale5", kernels::affine(x.value(), 5.0, 0.0), {x, c},
                           [&](const Tensor& g, GradSink& grads) {
                             wanted_constant = grads.wants(1);
                             if (grads.wants(0)) grads.add(0, kernels::affine(g, 5.0, 0.0));
                           });
  BOOST_TEST(y.grad_fn()->name() == "scale5");
  sum(y).backward();
  BOOST_TEST(!wanted_constant);
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{5, 5}));
}

BOOST_AUTO_TEST_CASE(intermediate_values_no_node_saves_are_freed) {
  Variable x = leaf({1, 2, 3}, {3});
  const Variable c(from_vector(std::vector<double>{4, 5, 6}, {3}, DType::f64), false);
  std::weak_ptr<Storage> unsaved, saved;
  Variable y;
  {
    // add_scalar saves nothing; mul saves only the operand the other side's gradient reads
    // (c, because x needs a gradient and c does not), so h is free to go.
    Variable h = add(x, 1.0);
    unsaved = h.value().storage();
    // exp saves its output for backward: e stays alive with the graph.
    Variable e = exp(x);
    saved = e.value().storage();
    y = sum(add(mul(h, c), e));
  }
  BOOST_TEST(unsaved.expired());
  BOOST_TEST(!saved.expired());
  y.backward();
  BOOST_TEST(saved.expired());  // released with its node during backward
  const std::vector<double> g = x.grad().to_vector();
  for (size_t i = 0; i < 3; ++i) BOOST_TEST(std::abs(g[i] - (c.value().to_vector()[i] + std::exp(i + 1.0))) < 1e-12);
}

BOOST_AUTO_TEST_CASE(non_leaf_results_get_no_grad) {
  // Non-leaf gradients live only inside one backward() call.
  Variable x = leaf({1, 2}, {2});
  Variable h = mul(x, 2.0);
  sum(h).backward();
  BOOST_TEST(!h.grad().defined());
  BOOST_TEST(x.grad().defined());
}

BOOST_AUTO_TEST_CASE(several_roots_in_one_pass) {
  Variable x = leaf({1, 2}, {2});
  Variable a = sum(mul(x, 2.0));
  Variable b = mul(x, 3.0);
  run_backward({a, b}, {Tensor(), from_vector(std::vector<double>{1, 10}, {2}, DType::f64)}, false);
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{5, 32}));
}

BOOST_AUTO_TEST_CASE(zero_grad_drops_the_gradient) {
  Variable x = leaf({1, 2}, {2});
  sum(x).backward();
  BOOST_TEST(x.grad().defined());
  x.zero_grad();
  BOOST_TEST(!x.grad().defined());
  sum(mul(x, 4.0)).backward();
  BOOST_TEST(x.grad().to_vector() == (std::vector<double>{4, 4}));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
