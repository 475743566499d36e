// GradSink, where a node's backward puts its inputs' gradients: add_matmul (the product
// accumulated straight into an existing gradient with BLAS beta = 1) against the composed
// matmul op, with pre-filled, non-contiguous and not-yet-existing gradients, leaves and
// non-leaves, f32 and f64; a temporary handed to add() is taken over by a leaf only when
// nothing else holds it; shapes are checked.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include "nn_ops_support.h"

namespace bdata = boost::unit_test::data;

namespace ag {
namespace {

using namespace testing;

// y = x w through add_matmul in backward: dx = g w^T, dw = x^T g (the twin is ag::matmul).
Variable sink_matmul(const Variable& x, const Variable& w) {
  const Tensor xv = x.value(), wv = w.value();
  return make_result("sink_matmul", kernels::matmul(xv, wv), {x, w}, [xv, wv](const Tensor& g, GradSink& grads) {
    if (grads.wants(0)) grads.add_matmul(0, g, wv.t());
    if (grads.wants(1)) grads.add_matmul(1, xv.t(), g);
  });
}

const std::vector<DType> kDTypes = {DType::f32, DType::f64};

double tol_for(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }

Variable wave_leaf(const Shape& shape, double a, DType dtype, const std::string& name) {
  return Variable(wave(shape, a, 0.3).to(dtype), true, name);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grad_sink)

BOOST_AUTO_TEST_CASE(add_matmul_passes_gradcheck_with_prefilled_grads) {
  // gradcheck pre-fills every leaf gradient and checks that backward added to it: the path
  // where the product is accumulated in place.
  const Variable x = randn_leaf({3, 4}, 1, "x"), w = randn_leaf({4, 5}, 2, "w");
  check_gradients([](const std::vector<Variable>& in) { return sink_matmul(in[0], in[1]); }, {x, w});
  // x feeding two products through a non-leaf: the second product lands in the gradient the
  // first one started.
  check_gradients(
      [](const std::vector<Variable>& in) {
        const Variable h = tanh(in[0]);
        return sink_matmul(h, in[1]) + sink_matmul(h, in[2]) * 0.5 + h * 2.0;
      },
      {randn_leaf({3, 4}, 3, "x"), randn_leaf({4, 4}, 4, "w1"), randn_leaf({4, 4}, 5, "w2")});
}

BOOST_DATA_TEST_CASE(add_matmul_equals_the_composed_product, bdata::make(kDTypes), dtype) {
  // Graphs where gradients meet in every possible order: a shared non-leaf consumed by two
  // products and an elementwise op (whose gradient the engine borrows), before and after.
  const Variable x = wave_leaf({5, 3}, 0.7, dtype, "x");
  const Variable w1 = wave_leaf({3, 4}, 0.9, dtype, "w1"), w2 = wave_leaf({3, 4}, 0.4, dtype, "w2");
  const Tensor upstream = wave({5, 4}, 0.61, 0.2).to(dtype);
  const auto graph = [&](auto&& product) {
    const Variable h = exp(x * 0.5);
    const Variable a = h * 3.0 + h;  // borrowed and owned gradients reach h
    return product(a, w1) + product(h, w2) + product(a, w2);
  };
  const std::vector<Variable> leaves{x, w1, w2};
  const std::vector<Tensor> fused = value_and_grads([&] { return graph(sink_matmul); }, leaves, upstream);
  const std::vector<Tensor> composed =
      value_and_grads([&] { return graph([](const Variable& p, const Variable& q) { return matmul(p, q); }); }, leaves,
                      upstream);
  for (size_t i = 0; i < fused.size(); ++i) {
    BOOST_TEST(fused[i].dtype() == dtype);
    BOOST_TEST(max_abs_diff(fused[i], composed[i]) < tol_for(dtype), "tensor " << i);
  }
}

BOOST_DATA_TEST_CASE(add_matmul_adds_to_existing_and_non_contiguous_grads, bdata::make(kDTypes), dtype) {
  const Variable x = wave_leaf({4, 3}, 0.5, dtype, "x");
  Variable w = wave_leaf({3, 2}, 0.8, dtype, "w");
  const Tensor g = wave({4, 2}, 0.3, 0.1).to(dtype);
  sink_matmul(x, w).backward(g);
  const Tensor once_x = x.grad().clone(), once_w = w.grad().clone();
  BOOST_TEST(max_abs_diff(once_w, kernels::matmul(x.value().t(), g)) < tol_for(dtype));
  BOOST_TEST(max_abs_diff(once_x, kernels::matmul(g, w.value().t())) < tol_for(dtype));

  // A second graph adds to the gradients the first one left (in place, same storage).
  const void* w_grad_data = w.grad().raw_data();
  sink_matmul(x, w).backward(g);
  BOOST_TEST(w.grad().raw_data() == w_grad_data);
  BOOST_TEST(max_abs_diff(w.grad(), kernels::affine(once_w, 2.0, 0.0)) < tol_for(dtype));
  BOOST_TEST(max_abs_diff(x.grad(), kernels::affine(once_x, 2.0, 0.0)) < tol_for(dtype));

  // retain_graph: backward twice through one graph doubles again.
  const Variable y = sink_matmul(x, w);
  y.backward(g, /*retain_graph=*/true);
  y.backward(g);
  BOOST_TEST(max_abs_diff(w.grad(), kernels::affine(once_w, 4.0, 0.0)) < tol_for(dtype));

  // A gradient set as a transposed view cannot take the product in place: it is added to.
  Tensor prefill = full({2, 3}, 1.0, dtype).t();
  BOOST_REQUIRE(!prefill.is_contiguous());
  w.set_grad(prefill);
  sink_matmul(x, w).backward(g);
  BOOST_TEST(max_abs_diff(w.grad(), kernels::add(full({3, 2}, 1.0, dtype), once_w)) < tol_for(dtype));
}

BOOST_AUTO_TEST_CASE(add_matmul_folds_leading_axes_into_rows) {
  // linear's dx: a (rows, in) product for an input of shape (B, T, in).
  const Variable x = randn_leaf({2, 3, 4}, 7, "x"), w = randn_leaf({5, 4}, 8, "w"), b = randn_leaf({5}, 9, "b");
  check_gradients([](const std::vector<Variable>& in) { return linear(tanh(in[0]), in[1], in[2]); }, {x, w, b});
}

BOOST_AUTO_TEST_CASE(add_matmul_checks_the_product_shape) {
  const Variable x = randn_leaf({3, 4}, 1, "x");
  const Tensor xv = x.value();
  const Variable wrong = make_result("wrong_product", xv.clone(), {x}, [xv](const Tensor& g, GradSink& grads) {
    grads.add_matmul(0, g, ones({4, 5}, DType::f64));  // (3, 5) for a (3, 4) input
  });
  AG_CHECK_THROWS_WITH(wrong.backward(ones({3, 4}, DType::f64)), std::logic_error, "'wrong_product'", "input 0",
                       "(3, 5)", "(3, 4)");
  const Variable bad_operands = make_result("bad_operands", xv.clone(), {x}, [](const Tensor& g, GradSink& grads) {
    grads.add_matmul(0, g, ones({3, 4}, DType::f64));  // inner dimensions 4 vs 3
  });
  AG_CHECK_THROWS_WITH(bad_operands.backward(ones({3, 4}, DType::f64)), std::logic_error, "'bad_operands'",
                       "add_matmul", "a=(3, 4)", "b=(3, 4)");
}

BOOST_AUTO_TEST_CASE(add_matmul_under_anomaly_mode_reports_non_finite_products) {
  Variable x = randn_leaf({2, 2}, 1, "x");
  const Variable w(from_vector(std::vector<double>{1, std::numeric_limits<double>::infinity(), 0, 1}, {2, 2},
                               DType::f64),
                   true, "w");
  x.set_grad(zeros({2, 2}, DType::f64));  // an existing gradient: the in-place path is skipped
  AnomalyGuard anomaly;
  AG_CHECK_THROWS_WITH(sink_matmul(x, w).backward(ones({2, 2}, DType::f64)), std::runtime_error, "anomaly",
                       "'sink_matmul'", "non-finite");
}

BOOST_AUTO_TEST_CASE(a_temporary_becomes_the_leaf_gradient_only_when_nobody_else_holds_it) {
  Variable x = randn_leaf({3}, 1, "x");
  const void* handed = nullptr;
  const Variable y = make_result("fresh", x.value().clone(), {x}, [&handed](const Tensor& g, GradSink& grads) {
    Tensor t = kernels::affine(g, 2.0, 0.0);
    handed = t.raw_data();
    grads.add(0, std::move(t));
  });
  y.backward(ones({3}, DType::f64));
  BOOST_TEST(x.grad().raw_data() == handed);  // taken over, not copied
  BOOST_TEST(x.grad().to_vector() == std::vector<double>(3, 2.0));

  // The op keeps a handle on what it sends: the leaf must get a copy.
  Variable z = randn_leaf({3}, 2, "z");
  Tensor kept;
  const Variable u = make_result("shared", z.value().clone(), {z}, [&kept](const Tensor& g, GradSink& grads) {
    kept = kernels::affine(g, 3.0, 0.0);
    grads.add(0, Tensor(kept));
  });
  u.backward(ones({3}, DType::f64));
  BOOST_TEST(!z.grad().shares_storage_with(kept));
  kept.fill_(-1.0);
  BOOST_TEST(z.grad().to_vector() == std::vector<double>(3, 3.0));

  // A view of the incoming gradient is not the sender's to give: copied too.
  Variable v = randn_leaf({2, 3}, 3, "v");
  const Variable r = reshape(v, {6});
  const Tensor seed = ones({6}, DType::f64);
  r.backward(seed);
  BOOST_TEST(!v.grad().shares_storage_with(seed));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag
