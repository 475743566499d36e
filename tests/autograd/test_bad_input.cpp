// Bad input: each case throws the documented exception type (invalid_argument for bad
// arguments, logic_error for misuse of the API) and its message names the op and the shapes
// or values involved, so that the user can find the call without a debugger.
#include "support.h"

namespace ag::testing {
namespace {

Variable var(const Shape& shape, DType dtype = DType::f64, bool requires_grad = true) {
  return Variable(ones(shape, dtype), requires_grad, "x");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bad_input_elementwise)

BOOST_AUTO_TEST_CASE(binary_ops_with_shapes_that_do_not_broadcast) {
  AG_CHECK_THROWS_WITH(add(var({2, 3}), var({4})), std::invalid_argument, "add", "(2, 3)", "(4,)");
  AG_CHECK_THROWS_WITH(mul(var({2, 3}), var({3, 2})), std::invalid_argument, "mul", "(2, 3)", "(3, 2)");
  AG_CHECK_THROWS_WITH(sub(var({5}), var({2, 3})), std::invalid_argument, "sub", "(5,)", "(2, 3)");
  AG_CHECK_THROWS_WITH(div(var({2, 1, 3}), var({2, 2})), std::invalid_argument, "div", "(2, 1, 3)", "(2, 2)");
  AG_CHECK_THROWS_WITH(pow(var({2, 3}), var({2})), std::invalid_argument, "pow", "(2, 3)", "(2,)");
  AG_CHECK_THROWS_WITH(kernels::add(ones({3}), ones({4})), std::invalid_argument, "add", "(3,)", "(4,)");
}

BOOST_AUTO_TEST_CASE(mixing_f32_and_f64) {
  AG_CHECK_THROWS_WITH(add(var({2, 3}, DType::f32), var({2, 3})), std::invalid_argument, "add", "f32", "f64", "(2, 3)");
  AG_CHECK_THROWS_WITH(mul(var({3}), var({2, 3}, DType::f32)), std::invalid_argument, "mul", "f32", "f64", "(3,)");
  AG_CHECK_THROWS_WITH(where(ones({3}), var({3}, DType::f32), var({3})), std::invalid_argument, "where", "f32", "f64");
  Tensor f32_sum = ones({2});
  AG_CHECK_THROWS_WITH(kernels::add_(f32_sum, ones({2}, DType::f64)), std::invalid_argument, "add_", "f32", "f64");
}

BOOST_AUTO_TEST_CASE(masks_that_do_not_broadcast) {
  AG_CHECK_THROWS_WITH(masked_fill(var({2, 3}), ones({3, 2}), 0.0), std::invalid_argument, "masked_fill", "(3, 2)",
                       "(2, 3)");
  // A mask may not enlarge the input either.
  AG_CHECK_THROWS_WITH(masked_fill(var({3}), ones({2, 3}), 0.0), std::invalid_argument, "masked_fill", "(2, 3)",
                       "(3,)");
  AG_CHECK_THROWS_WITH(where(ones({4}), var({2, 3}), var({2, 3})), std::invalid_argument, "where", "(4,)", "(2, 3)");
  AG_CHECK_THROWS_WITH(masked_fill(var({2}), Tensor(), 0.0), std::invalid_argument, "masked_fill", "undefined");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bad_input_matmul)

BOOST_AUTO_TEST_CASE(inner_dimensions_differ) {
  AG_CHECK_THROWS_WITH(matmul(var({4, 3}), var({5, 2})), std::invalid_argument, "matmul", "inner", "(4, 3)", "(5, 2)");
  // (B, T, C) @ (C, N) goes through a faster path; the message still shows the caller's shapes.
  AG_CHECK_THROWS_WITH(matmul(var({2, 4, 3}), var({5, 2})), std::invalid_argument, "matmul", "inner", "(2, 4, 3)",
                       "(5, 2)");
}

BOOST_AUTO_TEST_CASE(batch_dimensions_do_not_broadcast) {
  AG_CHECK_THROWS_WITH(matmul(var({2, 3, 4}), var({3, 4, 5})), std::invalid_argument, "matmul", "batch", "(2, 3, 4)",
                       "(3, 4, 5)");
}

BOOST_AUTO_TEST_CASE(one_dimensional_operand) {
  AG_CHECK_THROWS_WITH(matmul(var({3, 4}), var({4})), std::invalid_argument, "matmul", "2 dimensions", "(3, 4)", "(4,)");
  AG_CHECK_THROWS_WITH(matmul(var({4}), var({4, 3})), std::invalid_argument, "matmul", "(4,)", "(4, 3)");
  AG_CHECK_THROWS_WITH(matmul(var({2, 3, 4}), var({4})), std::invalid_argument, "matmul", "(2, 3, 4)", "(4,)");
}

BOOST_AUTO_TEST_CASE(dtypes_differ) {
  AG_CHECK_THROWS_WITH(matmul(var({3, 4}, DType::f32), var({4, 5})), std::invalid_argument, "matmul", "f32", "f64",
                       "(3, 4)", "(4, 5)");
  AG_CHECK_THROWS_WITH(matmul(var({2, 3, 4}, DType::f32), var({4, 5})), std::invalid_argument, "matmul", "f32", "f64",
                       "(2, 3, 4)", "(4, 5)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bad_input_axes)

BOOST_AUTO_TEST_CASE(reduction_axis_out_of_range) {
  AG_CHECK_THROWS_WITH(sum(var({2, 3}), {2}), std::invalid_argument, "sum", "axis 2", "(2, 3)");
  AG_CHECK_THROWS_WITH(mean(var({2, 3}), {-3}), std::invalid_argument, "mean", "axis -3", "(2, 3)");
  AG_CHECK_THROWS_WITH(max(var({2, 3}), {0, 7}), std::invalid_argument, "max", "axis 7", "(2, 3)");
  AG_CHECK_THROWS_WITH(kernels::amax(ones({4}), {1}), std::invalid_argument, "max", "axis 1", "(4,)");
}

BOOST_AUTO_TEST_CASE(reduction_axis_repeated) {
  AG_CHECK_THROWS_WITH(sum(var({2, 3}), {0, -2}), std::invalid_argument, "sum", "repeated", "(0, -2)", "(2, 3)");
  AG_CHECK_THROWS_WITH(kernels::mean(ones({2, 3}), {1, 1}), std::invalid_argument, "mean", "repeated", "(2, 3)");
}

BOOST_AUTO_TEST_CASE(softmax_axis_out_of_range) {
  AG_CHECK_THROWS_WITH(softmax(var({2, 3}), 2), std::invalid_argument, "softmax", "axis 2", "(2, 3)");
  AG_CHECK_THROWS_WITH(log_softmax(var({2, 3}), -3), std::invalid_argument, "log_softmax", "axis -3", "(2, 3)");
}

BOOST_AUTO_TEST_CASE(transpose_and_permute_axes) {
  AG_CHECK_THROWS_WITH(transpose(var({2, 3}), 0, 5), std::invalid_argument, "transpose", "axis 5", "(2, 3)");
  AG_CHECK_THROWS_WITH(permute(var({2, 3}), {0, 0}), std::invalid_argument, "permute", "repeated", "(0, 0)", "(2, 3)");
  AG_CHECK_THROWS_WITH(permute(var({2, 3}), {0}), std::invalid_argument, "permute", "(0,)", "(2, 3)");
  AG_CHECK_THROWS_WITH(permute(var({2, 3}), {0, 2}), std::invalid_argument, "permute", "axis 2", "(2, 3)");
  AG_CHECK_THROWS_WITH(ones({3}).t(), std::invalid_argument, "t", "(3,)");
}

BOOST_AUTO_TEST_CASE(unsqueeze_squeeze_select_axes) {
  AG_CHECK_THROWS_WITH(unsqueeze(var({2, 3}), 3), std::invalid_argument, "unsqueeze", "axis 3", "(2, 3)");
  AG_CHECK_THROWS_WITH(squeeze(var({2, 3}), 0), std::invalid_argument, "squeeze", "(2, 3)", "size 2");
  AG_CHECK_THROWS_WITH(squeeze(var({2, 1}), 2), std::invalid_argument, "squeeze", "axis 2", "(2, 1)");
  AG_CHECK_THROWS_WITH(ones({2, 3}).select(1, 3), std::invalid_argument, "select", "index 3", "(2, 3)");
  AG_CHECK_THROWS_WITH(ones({2, 3}).size(2), std::invalid_argument, "size", "axis 2", "(2, 3)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bad_input_shapes)

BOOST_AUTO_TEST_CASE(reshape_to_a_wrong_size) {
  AG_CHECK_THROWS_WITH(reshape(var({2, 3}), {4, 2}), std::invalid_argument, "reshape", "(2, 3)", "(4, 2)");
  AG_CHECK_THROWS_WITH(reshape(var({2, 3}), {4, -1}), std::invalid_argument, "reshape", "(2, 3)", "(4, -1)");
}

BOOST_AUTO_TEST_CASE(reshape_with_two_inferred_dimensions) {
  AG_CHECK_THROWS_WITH(reshape(var({2, 3}), {-1, -1}), std::invalid_argument, "reshape", "-1", "(-1, -1)", "(2, 3)");
  AG_CHECK_THROWS_WITH(ones({2, 3}).view({3, -2}), std::invalid_argument, "view", "(3, -2)", "(2, 3)");
}

BOOST_AUTO_TEST_CASE(view_of_a_non_contiguous_tensor) {
  AG_CHECK_THROWS_WITH(ones({2, 3}).t().view({6}), std::invalid_argument, "view", "(3, 2)", "not contiguous");
}

BOOST_AUTO_TEST_CASE(narrow_and_slice_out_of_range) {
  AG_CHECK_THROWS_WITH(narrow(var({2, 3}), 1, 2, 2), std::invalid_argument, "narrow", "[2, 4)", "(2, 3)");
  AG_CHECK_THROWS_WITH(narrow(var({2, 3}), 0, -1, 1), std::invalid_argument, "narrow", "(2, 3)");
  AG_CHECK_THROWS_WITH(slice(var({2, 3}), 1, 0, 3, 0), std::invalid_argument, "slice", "step", "(2, 3)");
}

BOOST_AUTO_TEST_CASE(expand_to_an_incompatible_shape) {
  AG_CHECK_THROWS_WITH(broadcast_to(var({2, 3}), {4, 3}), std::invalid_argument, "expand", "(2, 3)", "(4, 3)");
  AG_CHECK_THROWS_WITH(expand(var({3}), {3, 2}), std::invalid_argument, "expand", "(3,)", "(3, 2)");
}

BOOST_AUTO_TEST_CASE(concat_parts_that_do_not_match) {
  AG_CHECK_THROWS_WITH(concat({var({2, 3}), var({2, 4})}, 0), std::invalid_argument, "concat", "input 1", "(2, 4)",
                       "(2, 3)", "axis 0");
  AG_CHECK_THROWS_WITH(concat({var({2, 3}), var({2, 3, 1})}, 1), std::invalid_argument, "concat", "(2, 3, 1)");
  AG_CHECK_THROWS_WITH(concat({var({2, 3}), var({2, 3}, DType::f32)}, 1), std::invalid_argument, "concat", "f32",
                       "f64");
  AG_CHECK_THROWS_WITH(concat({}, 0), std::invalid_argument, "concat", "at least one");
  AG_CHECK_THROWS_WITH(concat({var({2, 3})}, 2), std::invalid_argument, "concat", "axis 2", "(2, 3)");
}

BOOST_AUTO_TEST_CASE(sum_to_and_copy_into_incompatible_shapes) {
  AG_CHECK_THROWS_WITH(kernels::sum_to(ones({2, 3}), {4}), std::invalid_argument, "sum_to", "(4,)", "(2, 3)");
  Tensor dst = zeros({2, 3});
  AG_CHECK_THROWS_WITH(dst.copy_(ones({3, 2})), std::invalid_argument, "copy_", "(3, 2)", "(2, 3)");
  AG_CHECK_THROWS_WITH(kernels::add_(dst, ones({2, 3, 1})), std::invalid_argument, "add_", "(2, 3, 1)", "(2, 3)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bad_input_tensors)

BOOST_AUTO_TEST_CASE(from_vector_size_mismatch) {
  AG_CHECK_THROWS_WITH(from_vector(std::vector<double>{1, 2, 3}, {2, 2}), std::invalid_argument, "from_vector",
                       "3 values", "(2, 2)");
  AG_CHECK_THROWS_WITH(Indices({2, 2}, {1, 2, 3}), std::invalid_argument, "Indices", "(2, 2)", "3 values");
}

BOOST_AUTO_TEST_CASE(item_on_a_multi_element_tensor) {
  AG_CHECK_THROWS_WITH(ones({2, 3}).item(), std::invalid_argument, "item", "(2, 3)");
  AG_CHECK_THROWS_WITH(var({2}).item(), std::invalid_argument, "item", "(2,)");
}

BOOST_AUTO_TEST_CASE(at_and_set_out_of_bounds) {
  Tensor t = zeros({2, 3});
  AG_CHECK_THROWS_WITH(t.at({2, 0}), std::invalid_argument, "at", "(2, 0)", "(2, 3)");
  AG_CHECK_THROWS_WITH(t.at({0, -1}), std::invalid_argument, "at", "(0, -1)", "(2, 3)");
  AG_CHECK_THROWS_WITH(t.at({1}), std::invalid_argument, "at", "(1,)", "(2, 3)", "rank");
  AG_CHECK_THROWS_WITH(t.set({0, 3}, 1.0), std::invalid_argument, "set", "(0, 3)", "(2, 3)");
}

BOOST_AUTO_TEST_CASE(bad_factory_arguments) {
  AG_CHECK_THROWS_WITH(uniform({2}, 1.0, 0.0), std::invalid_argument, "uniform", "low=1", "high=0");
  AG_CHECK_THROWS_WITH(normal({2}, 0.0, -1.0), std::invalid_argument, "normal", "std=-1");
  AG_CHECK_THROWS_WITH(arange(0.0, 1.0, 0.0), std::invalid_argument, "arange", "step=0");
  AG_CHECK_THROWS_WITH(zeros({2, -1}), std::invalid_argument, "zeros", "negative", "(2, -1)");
  AG_CHECK_THROWS_WITH(Tensor(Shape{2, -1}, DType::f32), std::invalid_argument, "Tensor", "negative", "(2, -1)");
}

BOOST_AUTO_TEST_CASE(undefined_tensors_and_variables) {
  AG_CHECK_THROWS_WITH(Variable(Tensor(), true), std::invalid_argument, "Variable", "undefined");
  AG_CHECK_THROWS_WITH(Variable().value(), std::logic_error, "value", "undefined");
  AG_CHECK_THROWS_WITH(Tensor().reshape({2}), std::logic_error, "reshape", "undefined");
  AG_CHECK_THROWS_WITH(kernels::unary(kernels::UnaryOp::exp, Tensor()), std::invalid_argument, "exp", "undefined");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bad_input_autograd)

BOOST_AUTO_TEST_CASE(backward_on_a_non_scalar_without_a_gradient) {
  AG_CHECK_THROWS_WITH(mul(var({2, 3}), 2.0).backward(), std::logic_error, "backward", "(2, 3)");
}

BOOST_AUTO_TEST_CASE(backward_through_a_freed_graph) {
  Variable y = sum(mul(var({2}), 2.0));
  y.backward();
  AG_CHECK_THROWS_WITH(y.backward(), std::logic_error, "backward", "'sum'", "freed");
}

BOOST_AUTO_TEST_CASE(backward_with_a_wrongly_shaped_gradient) {
  Variable y = mul(var({2, 3}), 2.0);
  AG_CHECK_THROWS_WITH(y.backward(ones({3}, DType::f64)), std::invalid_argument, "backward", "(3,)", "(2, 3)");
  AG_CHECK_THROWS_WITH(y.backward(ones({2, 3}, DType::f32)), std::invalid_argument, "backward", "f32", "f64");
}

BOOST_AUTO_TEST_CASE(backward_of_a_variable_that_does_not_require_grad) {
  AG_CHECK_THROWS_WITH(sum(var({2}, DType::f64, false)).backward(), std::logic_error, "backward", "does not require grad");
}

BOOST_AUTO_TEST_CASE(set_requires_grad_on_a_non_leaf) {
  Variable y = mul(var({2, 3}), 2.0);
  AG_CHECK_THROWS_WITH(y.set_requires_grad(false), std::logic_error, "set_requires_grad", "'mul_scalar'", "(2, 3)");
}

BOOST_AUTO_TEST_CASE(set_grad_with_the_wrong_shape) {
  Variable x = var({2, 3});
  AG_CHECK_THROWS_WITH(x.set_grad(ones({3}, DType::f64)), std::invalid_argument, "set_grad", "(3,)", "(2, 3)");
}

BOOST_AUTO_TEST_CASE(gradcheck_with_an_f32_input) {
  const auto fn = [](const std::vector<Variable>& in) { return exp(in[0]); };
  AG_CHECK_THROWS_WITH(gradcheck(fn, {var({2, 3}, DType::f32)}), std::invalid_argument, "gradcheck", "f32", "(2, 3)");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
