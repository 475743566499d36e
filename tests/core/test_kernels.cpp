// Numeric kernels: elementwise maps and broadcasting, reductions against hand-computed values
// and a naive reference, softmax, concat, and agreement between f32 and f64.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "attograd/autograd/ops/kernels.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

Tensor iota(const Shape& shape, DType dtype = DType::f64) { return arange(shape.numel(), dtype).reshape(shape); }

Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Generator gen(seed);
  return normal(shape, 0.0, 1.0, gen, dtype);
}

// The row-major multi-index of flat index i.
std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()));
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

// Reduction by brute force: every input element is folded into the output slot it lands on.
enum class Reduce { sum, mean, max };
Tensor reference_reduce(const Tensor& x, std::vector<int64_t> axes, bool keepdim, Reduce op) {
  for (int64_t& a : axes) a = a < 0 ? a + x.dim() : a;
  if (axes.empty()) {
    for (int64_t a = 0; a < x.dim(); ++a) axes.push_back(a);
  }
  const auto reduced = [&](int64_t d) { return std::find(axes.begin(), axes.end(), d) != axes.end(); };
  Shape kept;
  for (int64_t d = 0; d < x.dim(); ++d) kept.push_back(reduced(d) ? 1 : x.shape()[d]);
  const std::vector<double> v = x.to_vector();
  std::vector<double> acc(static_cast<size_t>(kept.numel()),
                          op == Reduce::max ? -std::numeric_limits<double>::infinity() : 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, x.shape());
    int64_t o = 0;
    for (int64_t d = 0; d < x.dim(); ++d) o = o * kept[d] + (reduced(d) ? 0 : idx[static_cast<size_t>(d)]);
    double& slot = acc[static_cast<size_t>(o)];
    slot = op == Reduce::max ? std::max(slot, v[static_cast<size_t>(i)]) : slot + v[static_cast<size_t>(i)];
  }
  if (op == Reduce::mean) {
    for (double& a : acc) a /= static_cast<double>(x.numel() / kept.numel());
  }
  Shape out;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!reduced(d)) out.push_back(x.shape()[d]);
    else if (keepdim) out.push_back(1);
  }
  return from_vector(acc, out, DType::f64);
}

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> axes;
  bool keepdim;
};
std::ostream& operator<<(std::ostream& os, const ReduceCase& c) {
  return os << c.shape << " axes " << Shape(c.axes) << (c.keepdim ? " keepdim" : "");
}

const std::vector<ReduceCase> kReduceCases = {
    {{2, 3, 4}, {}, false},      {{2, 3, 4}, {}, true},       {{2, 3, 4}, {0}, false},
    {{2, 3, 4}, {1}, true},      {{2, 3, 4}, {-1}, false},    {{2, 3, 4}, {0, 2}, false},
    {{2, 3, 4}, {2, 0}, true},   {{2, 3, 4}, {-1, -3}, true}, {{2, 3, 4}, {0, 1, 2}, false},
    {{5}, {0}, false},           {{3, 1, 4}, {1}, false},     {{2, 3, 4, 5}, {1, 3}, true},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(kernels_elementwise)

BOOST_AUTO_TEST_CASE(unary_ops_match_the_standard_library) {
  const Tensor x = from_vector(std::vector<double>{-2.0, -0.5, 0.25, 1.5}, {4}, DType::f64);
  const std::vector<double> v = x.to_vector();
  const auto expect = [&](kernels::UnaryOp op, auto f) {
    const std::vector<double> got = kernels::unary(op, x).to_vector();
    for (size_t i = 0; i < v.size(); ++i) {
      const double want = f(v[i]);
      BOOST_TEST(std::abs(got[i] - want) <= 1e-15 * std::max(1.0, std::abs(want)),
                 kernels::unary_name(op) << "(" << v[i] << ") = " << got[i] << ", expected " << want);
    }
  };
  expect(kernels::UnaryOp::neg, [](double a) { return -a; });
  expect(kernels::UnaryOp::exp, [](double a) { return std::exp(a); });
  expect(kernels::UnaryOp::tanh, [](double a) { return std::tanh(a); });
  expect(kernels::UnaryOp::sigmoid, [](double a) { return 1.0 / (1.0 + std::exp(-a)); });
  expect(kernels::UnaryOp::relu, [](double a) { return a > 0 ? a : 0.0; });
  expect(kernels::UnaryOp::gelu, [](double a) { return 0.5 * a * (1.0 + std::erf(a / std::numbers::sqrt2)); });
  expect(kernels::UnaryOp::gelu_tanh, [](double a) {  // GPT-2's formula as written
    return 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (a + 0.044715 * a * a * a)));
  });
  expect(kernels::UnaryOp::abs, [](double a) { return std::abs(a); });
  expect(kernels::UnaryOp::square, [](double a) { return a * a; });
  expect(kernels::UnaryOp::reciprocal, [](double a) { return 1.0 / a; });
  const Tensor pos = kernels::unary(kernels::UnaryOp::abs, x);
  BOOST_TEST(kernels::unary(kernels::UnaryOp::log, pos).at({3}) == std::log(1.5));
  BOOST_TEST(kernels::unary(kernels::UnaryOp::sqrt, pos).at({2}) == 0.5);
  BOOST_TEST(kernels::pow_scalar(pos, 3.0).at({0}) == 8.0);
  BOOST_TEST(kernels::pow_scalar(pos, -0.5).at({2}) == 2.0);
  BOOST_TEST(kernels::affine(x, 2.0, 1.0).to_vector() == (std::vector<double>{-3.0, 0.0, 1.5, 4.0}));
}

BOOST_AUTO_TEST_CASE(sigmoid_is_stable_for_large_magnitudes) {
  const Tensor x = from_vector(std::vector<double>{-800.0, 800.0}, {2}, DType::f64);
  const std::vector<double> y = kernels::unary(kernels::UnaryOp::sigmoid, x).to_vector();
  BOOST_TEST(y[0] == 0.0);
  BOOST_TEST(y[1] == 1.0);
}

BOOST_AUTO_TEST_CASE(unary_reads_non_contiguous_input_in_logical_order) {
  const Tensor x = iota({2, 3}).t();
  BOOST_TEST(kernels::unary(kernels::UnaryOp::neg, x).to_vector() == (std::vector<double>{0, -3, -1, -4, -2, -5}));
  BOOST_TEST(kernels::unary(kernels::UnaryOp::neg, x).is_contiguous());
}

BOOST_AUTO_TEST_CASE(binary_ops_broadcast) {
  const Tensor a = iota({2, 3});                                                   // [[0 1 2] [3 4 5]]
  const Tensor b = from_vector(std::vector<double>{10, 20, 30}, {3}, DType::f64);  // a row
  const Tensor c = from_vector(std::vector<double>{1, 2}, {2, 1}, DType::f64);     // a column
  BOOST_TEST(kernels::add(a, b).to_vector() == (std::vector<double>{10, 21, 32, 13, 24, 35}));
  BOOST_TEST(kernels::sub(b, a).to_vector() == (std::vector<double>{10, 19, 28, 7, 16, 25}));
  BOOST_TEST(kernels::mul(a, c).to_vector() == (std::vector<double>{0, 1, 2, 6, 8, 10}));
  BOOST_TEST(kernels::div(b, c).to_vector() == (std::vector<double>{10, 20, 30, 5, 10, 15}));
  // Column against row: both operands stretch.
  const Tensor outer = kernels::mul(c, b);
  BOOST_TEST(outer.shape() == Shape({2, 3}));
  BOOST_TEST(outer.to_vector() == (std::vector<double>{10, 20, 30, 20, 40, 60}));
  // A transposed operand is read in place.
  BOOST_TEST(kernels::add(a.t(), c.t()).to_vector() == (std::vector<double>{1, 5, 2, 6, 3, 7}));
  BOOST_TEST(kernels::binary(kernels::BinaryOp::maximum, a, full({}, 2.5, DType::f64)).to_vector() ==
             (std::vector<double>{2.5, 2.5, 2.5, 3, 4, 5}));
  BOOST_TEST(kernels::binary(kernels::BinaryOp::equal, a, full({1}, 4.0, DType::f64)).to_vector() ==
             (std::vector<double>{0, 0, 0, 0, 1, 0}));
  BOOST_TEST(kernels::binary(kernels::BinaryOp::pow, c, b.narrow(0, 0, 1)).to_vector() ==
             (std::vector<double>{1, 1024}));
}

BOOST_AUTO_TEST_CASE(add_in_place_accumulates_with_alpha_and_broadcast) {
  Tensor dst = ones({2, 3}, DType::f64);
  kernels::add_(dst, iota({2, 3}));
  BOOST_TEST(dst.to_vector() == (std::vector<double>{1, 2, 3, 4, 5, 6}));
  kernels::add_(dst, from_vector(std::vector<double>{1, 2, 3}, {3}, DType::f64), -2.0);
  BOOST_TEST(dst.to_vector() == (std::vector<double>{-1, -2, -3, 2, 1, 0}));
  // Into a transposed view of a larger base: only the viewed elements change.
  Tensor base = zeros({3, 3}, DType::f64);
  Tensor view = base.narrow(1, 0, 2).t();  // (2, 3)
  kernels::add_(view, iota({2, 3}));
  BOOST_TEST(base.to_vector() == (std::vector<double>{0, 3, 0, 1, 4, 0, 2, 5, 0}));
}

BOOST_AUTO_TEST_CASE(where_selects_with_broadcasting) {
  const Tensor cond = from_vector(std::vector<double>{1, 0, 1}, {3}, DType::f64);
  const Tensor a = iota({2, 3});
  const Tensor b = full({2, 1}, -1.0, DType::f64);
  BOOST_TEST(kernels::where(cond, a, b).to_vector() == (std::vector<double>{0, -1, 2, 3, -1, 5}));
}

BOOST_AUTO_TEST_CASE(concat_joins_along_any_axis) {
  const Tensor a = iota({2, 2});
  const Tensor b = full({2, 1}, 9.0, DType::f64);
  BOOST_TEST(kernels::concat({a, b}, 1).to_vector() == (std::vector<double>{0, 1, 9, 2, 3, 9}));
  BOOST_TEST(kernels::concat({a, b.t().expand({1, 2})}, 0).to_vector() == (std::vector<double>{0, 1, 2, 3, 9, 9}));
  BOOST_TEST(kernels::concat({a.t(), a}, -1).to_vector() == (std::vector<double>{0, 2, 0, 1, 1, 3, 2, 3}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(kernels_reductions)

BOOST_AUTO_TEST_CASE(sum_mean_max_hand_computed) {
  // x = [[0 1 2 3]
  //      [4 5 6 7]
  //      [8 9 10 11]]
  const Tensor x = iota({3, 4});
  BOOST_TEST(kernels::sum(x, {}).item() == 66.0);
  BOOST_TEST(kernels::sum(x, {}).dim() == 0);
  BOOST_TEST(kernels::sum(x, {0}).to_vector() == (std::vector<double>{12, 15, 18, 21}));
  BOOST_TEST(kernels::sum(x, {1}).to_vector() == (std::vector<double>{6, 22, 38}));
  BOOST_TEST(kernels::sum(x, {-1}, true).shape() == Shape({3, 1}));
  BOOST_TEST(kernels::mean(x, {0}).to_vector() == (std::vector<double>{4, 5, 6, 7}));
  BOOST_TEST(kernels::mean(x, {1}, true).to_vector() == (std::vector<double>{1.5, 5.5, 9.5}));
  BOOST_TEST(kernels::mean(x, {}).item() == 5.5);
  BOOST_TEST(kernels::amax(x, {0}).to_vector() == (std::vector<double>{8, 9, 10, 11}));
  // Maxima in different places per row, including negative values.
  const Tensor y = from_vector(std::vector<double>{-3, -1, -2, 4, 9, -9}, {2, 3}, DType::f64);
  BOOST_TEST(kernels::amax(y, {1}).to_vector() == (std::vector<double>{-1, 9}));
  BOOST_TEST(kernels::amax(y, {0}, true).to_vector() == (std::vector<double>{4, 9, -2}));
  BOOST_TEST(kernels::amax(y, {0}, true).shape() == Shape({1, 3}));
  BOOST_TEST(kernels::amax(y, {}).item() == 9.0);
}

BOOST_AUTO_TEST_CASE(reductions_read_transposed_input) {
  const Tensor xt = iota({3, 4}).t();  // (4, 3): rows are the columns of x
  BOOST_TEST(kernels::sum(xt, {1}).to_vector() == (std::vector<double>{12, 15, 18, 21}));
  BOOST_TEST(kernels::amax(xt, {0}).to_vector() == (std::vector<double>{3, 7, 11}));
}

BOOST_DATA_TEST_CASE(reductions_match_a_naive_reference, bdata::make(kReduceCases), c) {
  const Tensor x = randn(c.shape, 11);
  // Also through a non-contiguous layout: the same values, permuted in memory.
  std::vector<int64_t> order;
  for (int64_t d = c.shape.rank() - 1; d >= 0; --d) order.push_back(d);
  const Tensor x_strided = x.permute(order).contiguous().permute(order);
  BOOST_TEST(x_strided.to_vector() == x.to_vector());
  for (const Tensor& in : {x, x_strided}) {
    const std::pair<Tensor, Reduce> cases[] = {{kernels::sum(in, c.axes, c.keepdim), Reduce::sum},
                                               {kernels::mean(in, c.axes, c.keepdim), Reduce::mean},
                                               {kernels::amax(in, c.axes, c.keepdim), Reduce::max}};
    for (const auto& [got, op] : cases) {
      const Tensor want = reference_reduce(in, c.axes, c.keepdim, op);
      BOOST_TEST(got.shape() == want.shape(), got.shape() << " vs " << want.shape());
      BOOST_TEST(max_abs_diff(got, want) <= 1e-13);
    }
  }
}

BOOST_AUTO_TEST_CASE(f32_sums_accumulate_in_double) {
  // 2^24 + 1 is not representable in f32: a float accumulator adding eight ones one by one to
  // 2^24 would stay at 2^24; the exact total 2^24 + 8 is representable.
  Tensor x = ones({9}, DType::f32);
  x.set({0}, 16777216.0);
  BOOST_TEST(kernels::sum(x, {}).item() == 16777224.0);
  BOOST_TEST(kernels::sum(x.reshape({1, 9}), {1}).item() == 16777224.0);
}

BOOST_AUTO_TEST_CASE(sum_to_reduces_broadcast_dimensions) {
  const Tensor g = iota({2, 3, 4});
  const Tensor a = kernels::sum_to(g, {3, 1});
  BOOST_TEST(a.shape() == Shape({3, 1}));
  BOOST_TEST(max_abs_diff(a, kernels::sum(g, {0, 2}).reshape({3, 1})) == 0.0);
  const Tensor b = kernels::sum_to(g, {4});
  BOOST_TEST(max_abs_diff(b, kernels::sum(g, {0, 1})) == 0.0);
  BOOST_TEST(kernels::sum_to(g, {}).item() == 276.0);
  BOOST_TEST(kernels::sum_to(g, {1, 3, 4}).to_vector() == kernels::sum(g, {0}).to_vector());
  // The backward of expand: sum_to(expand(x)) == x * (number of copies).
  const Tensor x = iota({3, 1});
  BOOST_TEST(kernels::sum_to(x.expand({2, 3, 4}), {3, 1}).to_vector() == (std::vector<double>{0, 8, 16}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(kernels_softmax)

BOOST_AUTO_TEST_CASE(softmax_rows_sum_to_one_along_every_axis) {
  const Tensor x = kernels::affine(randn({3, 4, 5}, 5), 4.0, 0.0);
  for (int64_t axis : {0, 1, 2, -1}) {
    const Tensor y = kernels::softmax(x, axis);
    BOOST_TEST(y.shape() == x.shape());
    const Tensor totals = kernels::sum(y, {axis});
    BOOST_TEST(max_abs_diff(totals, ones(totals.shape(), DType::f64)) <= 1e-14, "axis " << axis);
    BOOST_TEST(kernels::amax(kernels::unary(kernels::UnaryOp::neg, y), {}).item() < 0.0);  // all positive
  }
}

BOOST_AUTO_TEST_CASE(softmax_matches_the_definition_and_survives_large_inputs) {
  const Tensor x = from_vector(std::vector<double>{1, 2, 3, 1000, 1001, 1002}, {2, 3}, DType::f64);
  const std::vector<double> y = kernels::softmax(x, -1).to_vector();
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const std::vector<double> want = {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z};
  for (size_t i = 0; i < 6; ++i) BOOST_TEST(std::abs(y[i] - want[i % 3]) <= 1e-15, "element " << i);
  const std::vector<double> ls = kernels::log_softmax(x, 1).to_vector();
  for (size_t i = 0; i < 6; ++i) BOOST_TEST(std::abs(ls[i] - std::log(want[i % 3])) <= 1e-13, "element " << i);
  // Along axis 0 of the transposed input: the same numbers.
  BOOST_TEST(max_abs_diff(kernels::softmax(x.t(), 0), kernels::softmax(x, 1).t()) <= 1e-16);
}

BOOST_AUTO_TEST_CASE(all_minus_inf_row_gives_zeros) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = from_vector(std::vector<double>{-inf, -inf, -inf, 0.0, -inf, 0.0}, {2, 3}, DType::f64);
  const Tensor y = kernels::softmax(x, 1);
  BOOST_TEST(y.to_vector() == (std::vector<double>{0, 0, 0, 0.5, 0, 0.5}));
  // Its backward is finite and zero on the empty row.
  const Tensor g = kernels::softmax_backward(y, iota({2, 3}), 1);
  BOOST_TEST(g.to_vector()[0] == 0.0);
  BOOST_TEST(g.to_vector()[2] == 0.0);
  BOOST_TEST(g.to_vector()[3] == -0.5);  // 0.5 * (3 - (0.5*3 + 0.5*5))
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(kernels_f32_vs_f64)

BOOST_AUTO_TEST_CASE(every_kernel_agrees_across_dtypes) {
  const Tensor a = randn({3, 4, 5}, 21);
  const Tensor b = randn({4, 1}, 22);
  const Tensor pos = kernels::affine(kernels::unary(kernels::UnaryOp::abs, a), 1.0, 0.5);
  const auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
  // Each entry computes the same thing from f64 or f32 operands; results are compared in f64.
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>>> ops = {
      {"add", [](auto& x, auto& y, auto&) { return kernels::add(x, y); }},
      {"mul", [](auto& x, auto& y, auto&) { return kernels::mul(x.t(), y.t()); }},
      {"div", [](auto& x, auto&, auto& p) { return kernels::div(x, p); }},
      {"exp", [](auto& x, auto&, auto&) { return kernels::unary(kernels::UnaryOp::exp, x); }},
      {"log", [](auto&, auto&, auto& p) { return kernels::unary(kernels::UnaryOp::log, p); }},
      {"sqrt", [](auto&, auto&, auto& p) { return kernels::unary(kernels::UnaryOp::sqrt, p); }},
      {"tanh", [](auto& x, auto&, auto&) { return kernels::unary(kernels::UnaryOp::tanh, x); }},
      {"sigmoid", [](auto& x, auto&, auto&) { return kernels::unary(kernels::UnaryOp::sigmoid, x); }},
      {"gelu", [](auto& x, auto&, auto&) { return kernels::unary(kernels::UnaryOp::gelu, x); }},
      {"gelu_tanh", [](auto& x, auto&, auto&) { return kernels::unary(kernels::UnaryOp::gelu_tanh, x); }},
      {"pow", [](auto&, auto&, auto& p) { return kernels::pow_scalar(p, 1.7); }},
      {"sum", [](auto& x, auto&, auto&) { return kernels::sum(x, {0, 2}); }},
      {"mean", [](auto& x, auto&, auto&) { return kernels::mean(x, {1}, true); }},
      {"amax", [](auto& x, auto&, auto&) { return kernels::amax(x, {-1}); }},
      {"softmax", [](auto& x, auto&, auto&) { return kernels::softmax(x, 1); }},
      {"log_softmax", [](auto& x, auto&, auto&) { return kernels::log_softmax(x, -1); }},
      {"matmul", [](auto& x, auto&, auto&) { return kernels::matmul(x, x.t()); }},
  };
  for (const auto& [name, op] : ops) {
    const Tensor want = op(a, b, pos);
    const Tensor got = op(f32(a), f32(b), f32(pos));
    BOOST_TEST(got.dtype() == DType::f32, name);
    const double scale = std::max(1.0, kernels::amax(kernels::unary(kernels::UnaryOp::abs, want), {}).item());
    BOOST_TEST(max_abs_diff(got, want) <= 2e-6 * scale, name << ": " << max_abs_diff(got, want));
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
