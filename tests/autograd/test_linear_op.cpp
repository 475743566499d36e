// The fused linear op (autograd/nn_ops.h): float64 gradient checks on the input, the weight
// and the bias (batched, non-contiguous, one vector, no bias), fused == composed from matmul,
// transpose and add, and bad input naming the op and every shape.
#include "nn_ops_support.h"

namespace ag {
namespace {

using namespace testing;

Variable composed_linear(const Variable& x, const Variable& w, const Variable& b) {
  const Variable y = matmul(x.dim() == 1 ? unsqueeze(x, 0) : x, transpose(w, 0, 1));
  const Variable y1 = x.dim() == 1 ? squeeze(y, 0) : y;
  return b.defined() ? y1 + b : y1;
}

BOOST_AUTO_TEST_SUITE(linear_op)

BOOST_AUTO_TEST_CASE(linear_gradcheck_on_input_weight_and_bias) {
  for (const Shape& x_shape : {Shape{5}, Shape{3, 5}, Shape{2, 3, 5}, Shape{2, 2, 3, 5}}) {
    BOOST_TEST_CONTEXT("x " << x_shape) {
      const Variable x = randn_leaf(x_shape, 1, "x");
      const Variable w = randn_leaf({4, 5}, 2, "weight");
      const Variable b = randn_leaf({4}, 3, "bias");
      check_gradients([](const std::vector<Variable>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
      check_gradients([](const std::vector<Variable>& in) { return linear(in[0], in[1]); }, {x, w});
    }
  }
}

BOOST_AUTO_TEST_CASE(linear_reads_transposed_input_and_weight) {
  const Variable x = transposed_leaf({3, 4, 5}, 0, 1, 4);  // (3, 4, 5) stored as (4, 3, 5)
  const Variable w = transposed_leaf({6, 5}, 0, 1, 5);     // (6, 5) stored as (5, 6)
  const Variable b = randn_leaf({6}, 6, "bias");
  BOOST_REQUIRE(!x.value().is_contiguous());
  BOOST_REQUIRE(!w.value().is_contiguous());
  check_gradients([](const std::vector<Variable>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
}

BOOST_AUTO_TEST_CASE(fused_linear_equals_the_composed_one) {
  for (const Shape& x_shape : {Shape{5}, Shape{7, 5}, Shape{2, 3, 5}}) {
    const Variable x = leaf(wave(x_shape, 0.37, 0.1));
    const Variable w = leaf(wave({4, 5}, 0.91, 0.2));
    const Variable b = leaf(wave({4}, 0.53, 1.3));
    Shape y_shape(std::vector<int64_t>(x_shape.begin(), x_shape.end() - 1));
    y_shape.push_back(4);
    const Tensor upstream = wave(y_shape, 0.29, 0.4);
    check_twins([&] { return linear(x, w, b); }, [&] { return composed_linear(x, w, b); }, {x, w, b}, upstream);
    check_twins([&] { return linear(x, w); }, [&] { return composed_linear(x, w, Variable()); }, {x, w}, upstream);
  }
}

BOOST_AUTO_TEST_CASE(linear_backward_adds_and_skips_unwanted_gradients) {
  const Variable x(wave({3, 5}, 0.3, 0.2), false);  // needs no gradient
  const Variable w = leaf(wave({4, 5}, 0.7, 0.1));
  const Variable b = leaf(wave({4}, 0.5, 0.3));
  linear(x, w, b).backward(ones({3, 4}, DType::f64));
  const Tensor once_w = w.grad().clone(), once_b = b.grad().clone();
  linear(x, w, b).backward(ones({3, 4}, DType::f64));
  BOOST_TEST(max_abs_diff(w.grad(), kernels::affine(once_w, 2.0, 0.0)) < 1e-12);
  BOOST_TEST(max_abs_diff(b.grad(), kernels::affine(once_b, 2.0, 0.0)) < 1e-12);
  BOOST_TEST(max_abs_diff(once_b, full({4}, 3.0, DType::f64)) < 1e-12);  // bias gradient: row count
  BOOST_TEST(!x.grad().defined());
}

BOOST_AUTO_TEST_CASE(linear_backward_twice_with_retain_graph_doubles_grads) {
  // Backward drops the saved input after dW only when the graph is being freed: a retained
  // graph must still have it for the second pass, for x's and the weight's gradients alike.
  for (const DType dtype : {DType::f32, DType::f64}) {
    const Variable x0 = leaf(wave({2, 3, 5}, 0.3, 0.2).to(dtype));
    const Variable w = leaf(wave({4, 5}, 0.7, 0.1).to(dtype)), b = leaf(wave({4}, 0.5, 0.3).to(dtype));
    const Variable y = linear(tanh(x0), w, b);  // x is a non-leaf, as in a network
    const Tensor g = wave({2, 3, 4}, 0.45, 0.6).to(dtype);
    y.backward(g, /*retain_graph=*/true);
    const Tensor once_x = x0.grad().clone(), once_w = w.grad().clone(), once_b = b.grad().clone();
    y.backward(g);
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    BOOST_TEST(max_abs_diff(x0.grad(), kernels::affine(once_x, 2.0, 0.0)) < tol);
    BOOST_TEST(max_abs_diff(w.grad(), kernels::affine(once_w, 2.0, 0.0)) < tol);
    BOOST_TEST(max_abs_diff(b.grad(), kernels::affine(once_b, 2.0, 0.0)) < tol);
    AG_CHECK_THROWS_WITH(y.backward(g), std::logic_error, "'linear'", "already freed");
  }
}

BOOST_AUTO_TEST_CASE(f32_bias_gradient_is_the_row_by_row_double_sum) {
  // The column sum takes four rows per pass; every row count (whole passes, remainders, fewer
  // rows than a pass) must give exactly the row-by-row sum in double, rounded once to float.
  for (const int64_t rows : {1, 2, 3, 4, 5, 7, 8, 9, 37}) {
    const Variable x(wave({rows, 3}, 0.3, 0.2).to(DType::f32), false);
    const Variable w = leaf(wave({6, 3}, 0.7, 0.1).to(DType::f32));
    const Variable b = leaf(wave({6}, 0.5, 0.3).to(DType::f32));
    const Tensor g = wave({rows, 6}, 12.345, 0.6, 1e3).to(DType::f32);  // magnitudes that round differently
    linear(x, w, b).backward(g);
    const std::vector<double> gv = g.to_vector();
    for (int64_t j = 0; j < 6; ++j) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += gv[static_cast<size_t>(r * 6 + j)];
      BOOST_TEST(b.grad().at({j}) == static_cast<double>(static_cast<float>(s)), "rows " << rows << " column " << j);
    }
  }
}

BOOST_AUTO_TEST_CASE(linear_rejects_bad_shapes_and_dtypes) {
  const Variable x = randn_leaf({2, 5}, 1);
  const Variable w = randn_leaf({4, 5}, 2);
  AG_CHECK_THROWS_WITH(linear(randn_leaf({2, 6}, 1), w), std::invalid_argument, "linear", "(2, 6)", "(4, 5)");
  AG_CHECK_THROWS_WITH(linear(x, randn_leaf({4, 5, 1}, 2)), std::invalid_argument, "linear", "(4, 5, 1)");
  AG_CHECK_THROWS_WITH(linear(x, w, randn_leaf({5}, 3)), std::invalid_argument, "linear", "bias", "(5,)", "(4,)");
  AG_CHECK_THROWS_WITH(linear(x, randn_leaf({4, 5}, 2, "", DType::f32)), std::invalid_argument, "linear", "f32",
                       "f64");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag
