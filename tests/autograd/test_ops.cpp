// Every op in autograd/ops.h, gradient-checked in f64 (central differences against backward):
// on contiguous leaves, on leaves whose value is a transposed or permuted view of a bigger
// tensor, and on broadcast operands. Inputs avoid kinks on purpose: relu away from 0, max
// without ties, log/sqrt/pow of positive values, divisors away from 0.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <functional>
#include <limits>

#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

// contiguous: a tensor of its own. transposed: the last two axes of a contiguous tensor swapped
// (.t(), what BLAS reads with CblasTrans). strided: every other element of a tensor with all
// axes reversed (a permute of a bigger tensor; nothing can read it as contiguous).
enum class Layout { contiguous, transposed, strided };
std::ostream& operator<<(std::ostream& os, Layout l) {
  return os << (l == Layout::contiguous ? "contiguous" : l == Layout::transposed ? "transposed" : "strided");
}
const std::vector<Layout> kLayouts = {Layout::contiguous, Layout::transposed, Layout::strided};

// normal: N(0, 1). positive: [0.5, 2). away_from_zero: +-[0.3, 1.3). distinct: no two values
// closer than 0.25 (a max without ties even after a finite-difference step).
enum class Fill { normal, positive, away_from_zero, distinct };

Tensor fill_values(const Shape& shape, Fill fill, uint64_t seed) {
  Generator gen(seed);
  switch (fill) {
    case Fill::normal: return normal(shape, 0.0, 1.0, gen, DType::f64);
    case Fill::positive: return uniform(shape, 0.5, 2.0, gen, DType::f64);
    case Fill::away_from_zero: {
      std::vector<double> v = uniform(shape, -1.0, 1.0, gen, DType::f64).to_vector();
      for (double& x : v) x = x < 0 ? x - 0.3 : x + 0.3;
      return from_vector(v, shape, DType::f64);
    }
    case Fill::distinct: {
      std::vector<double> v(static_cast<size_t>(shape.numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25 * (static_cast<double>(i) - static_cast<double>(v.size()) / 2);
      const uint64_t key = gen.next_stream();
      for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Generator::bits(key, i) % i]);  // shuffle
      return from_vector(v, shape, DType::f64);
    }
  }
  return Tensor();
}

// A leaf holding `fill` values of `shape`, laid out in memory as `layout` asks.
Variable leaf(const Shape& shape, Layout layout, Fill fill, uint64_t seed, const std::string& name = "x") {
  const Tensor values = fill_values(shape, fill, seed);
  if (layout == Layout::contiguous || shape.rank() == 0) return Variable(values, true, name);
  const int64_t r = shape.rank();
  Tensor view;
  // Swapping an axis of size 1 changes nothing: such shapes get the strided layout instead.
  if (layout == Layout::transposed && r >= 2 && shape[-1] > 1 && shape[-2] > 1) {
    Shape swapped = shape;
    std::swap(swapped[-1], swapped[-2]);
    view = zeros(swapped, DType::f64).t();
  } else {
    std::vector<int64_t> reversed_dims, order;
    for (int64_t d = r - 1; d >= 0; --d) reversed_dims.push_back(2 * shape[d]), order.push_back(d);
    view = zeros(Shape(reversed_dims), DType::f64).permute(order);
    for (int64_t d = 0; d < r; ++d) view = view.slice(d, 0, 2 * shape[d], 2);
  }
  view.copy_(values);
  BOOST_TEST_REQUIRE((shape.numel() <= 1 || !view.is_contiguous()), layout << " layout of " << shape << " is contiguous");
  return Variable(view, true, name);
}

// Gradient check, plus the forward on the laid-out inputs must equal the forward on
// contiguous copies of them (ops read views in place).
void check_op(const GradcheckFn& fn, const std::vector<Variable>& inputs) {
  std::vector<Variable> plain;
  for (const Variable& v : inputs) plain.push_back(Variable(v.value().clone(), v.requires_grad()));
  BOOST_TEST(max_abs_diff(fn(inputs).value(), fn(plain).value()) <= 1e-13);
  check_gradients(fn, inputs);
}

template <typename F>
struct Named {
  std::string name;
  F fn;
  Fill fill = Fill::normal;
};
template <typename F>
std::ostream& operator<<(std::ostream& os, const Named<F>& c) { return os << c.name; }

using Unary = Named<std::function<Variable(const Variable&)>>;
using Binary = Named<std::function<Variable(const Variable&, const Variable&)>>;

// ---- elementwise ----
const std::vector<Unary> kUnary = {
    {"neg", [](const Variable& x) { return neg(x); }},
    {"operator-", [](const Variable& x) { return -x; }},
    {"exp", [](const Variable& x) { return exp(x); }},
    {"log", [](const Variable& x) { return log(x); }, Fill::positive},
    {"sqrt", [](const Variable& x) { return sqrt(x); }, Fill::positive},
    {"pow_2", [](const Variable& x) { return pow(x, 2.0); }},
    {"pow_3", [](const Variable& x) { return pow(x, 3.0); }},
    {"pow_0.5", [](const Variable& x) { return pow(x, 0.5); }, Fill::positive},
    {"pow_-1.5", [](const Variable& x) { return pow(x, -1.5); }, Fill::positive},
    {"tanh", [](const Variable& x) { return tanh(x); }},
    {"sigmoid", [](const Variable& x) { return sigmoid(x); }},
    {"relu", [](const Variable& x) { return relu(x); }, Fill::away_from_zero},
    {"gelu", [](const Variable& x) { return gelu(x); }},
    {"gelu_tanh", [](const Variable& x) { return gelu_tanh(x); }},
    {"add_scalar", [](const Variable& x) { return add(x, 2.5); }},
    {"mul_scalar", [](const Variable& x) { return mul(x, -1.5); }},
    {"x+2", [](const Variable& x) { return x + 2.0; }},
    {"2+x", [](const Variable& x) { return 2.0 + x; }},
    {"x-2", [](const Variable& x) { return x - 2.0; }},
    {"2-x", [](const Variable& x) { return 2.0 - x; }},
    {"3*x", [](const Variable& x) { return 3.0 * x; }},
    {"x*3", [](const Variable& x) { return x * 3.0; }},
    {"x/4", [](const Variable& x) { return x / 4.0; }},
};
const std::vector<Shape> kUnaryShapes = {{5}, {3, 4}, {2, 3, 4}};

// The second operand of div is positive (away from 0); pow's base is positive.
const std::vector<Binary> kBinary = {
    {"add", [](const Variable& a, const Variable& b) { return add(a, b); }},
    {"sub", [](const Variable& a, const Variable& b) { return sub(a, b); }},
    {"mul", [](const Variable& a, const Variable& b) { return mul(a, b); }},
    {"div", [](const Variable& a, const Variable& b) { return div(a, b); }},
    {"pow", [](const Variable& a, const Variable& b) { return pow(b, a); }},
    {"operators", [](const Variable& a, const Variable& b) { return (a + b) * a - b / (b * 2.0); }},
};

struct ShapePair {
  Shape a, b;
};
std::ostream& operator<<(std::ostream& os, const ShapePair& p) { return os << p.a << " and " << p.b; }
const std::vector<ShapePair> kBinaryShapes = {
    {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {3, 1}}, {{3, 1}, {2, 1, 4}}, {{2, 3, 4}, {}}, {{4}, {2, 3, 4}},
};

struct LayoutPair {
  Layout a, b;
};
std::ostream& operator<<(std::ostream& os, const LayoutPair& p) { return os << p.a << "/" << p.b; }
const std::vector<LayoutPair> kLayoutPairs = {{Layout::contiguous, Layout::contiguous},
                                              {Layout::transposed, Layout::contiguous},
                                              {Layout::contiguous, Layout::strided},
                                              {Layout::strided, Layout::transposed}};

}  // namespace

BOOST_AUTO_TEST_SUITE(ops_elementwise)

BOOST_DATA_TEST_CASE(unary_ops_pass_gradcheck, bdata::make(kUnary) * bdata::make(kUnaryShapes) * bdata::make(kLayouts),
                     op, shape, layout) {
  const Variable x = leaf(shape, layout, op.fill, 1);
  check_op([&](const std::vector<Variable>& in) { return op.fn(in[0]); }, {x});
}

BOOST_DATA_TEST_CASE(binary_ops_pass_gradcheck,
                     bdata::make(kBinary) * bdata::make(kBinaryShapes) * bdata::make(kLayoutPairs), op, shapes,
                     layouts) {
  const Variable a = leaf(shapes.a, layouts.a, Fill::normal, 2, "a");
  const Variable b = leaf(shapes.b, layouts.b, Fill::positive, 3, "b");
  const auto fn = [&](const std::vector<Variable>& in) { return op.fn(in[0], in[1]); };
  check_op(fn, {a, b});
  BOOST_TEST(fn({a, b}).shape() == broadcast_shapes(shapes.a, shapes.b));
}

BOOST_DATA_TEST_CASE(binary_ops_with_one_constant_operand, bdata::make(kBinary), op) {
  // Only one side requires grad: the other side's gradient must not be needed (or computed).
  const Variable a = leaf({2, 3}, Layout::transposed, Fill::normal, 4, "a");
  const Variable b(fill_values({3}, Fill::positive, 5), false, "b");
  check_op([&](const std::vector<Variable>& in) { return op.fn(in[0], b); }, {a});
  const Variable c(fill_values({2, 3}, Fill::normal, 6), false, "c");
  const Variable d = leaf({2, 1}, Layout::contiguous, Fill::positive, 7, "d");
  check_op([&](const std::vector<Variable>& in) { return op.fn(c, in[0]); }, {d});
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// ---- reductions ----
using Reduction = Named<std::function<Variable(const Variable&, const std::vector<int64_t>&, bool)>>;
const std::vector<Reduction> kReductions = {
    {"sum", [](const Variable& x, const std::vector<int64_t>& a, bool k) { return sum(x, a, k); }},
    {"mean", [](const Variable& x, const std::vector<int64_t>& a, bool k) { return mean(x, a, k); }},
    {"max", [](const Variable& x, const std::vector<int64_t>& a, bool k) { return max(x, a, k); }, Fill::distinct},
};
struct Axes {
  std::vector<int64_t> axes;
  bool keepdim;
};
std::ostream& operator<<(std::ostream& os, const Axes& a) { return os << Shape(a.axes) << (a.keepdim ? " keepdim" : ""); }
const std::vector<Axes> kAxes = {{{}, false}, {{}, true},      {{0}, false},     {{1}, true},
                                 {{-1}, false}, {{0, 2}, true}, {{-1, -3}, false}, {{2, 1}, true}};

}  // namespace

BOOST_AUTO_TEST_SUITE(ops_reduce)

BOOST_DATA_TEST_CASE(reductions_pass_gradcheck, bdata::make(kReductions) * bdata::make(kAxes) * bdata::make(kLayouts),
                     op, axes, layout) {
  const Variable x = leaf({2, 3, 4}, layout, op.fill, 8);
  check_op([&](const std::vector<Variable>& in) { return op.fn(in[0], axes.axes, axes.keepdim); }, {x});
}

BOOST_AUTO_TEST_CASE(max_splits_the_gradient_evenly_among_ties) {
  // Row 0 has its maximum 3 twice, row 1 is constant (three ties), row 2 has a single maximum.
  const Variable x(from_vector(std::vector<double>{1, 3, 3, 2, 2, 2, 5, -1, 0}, {3, 3}, DType::f64), true);
  max(x, {1}).backward(from_vector(std::vector<double>{2, 6, 4}, {3}, DType::f64));
  const std::vector<double> expected = {0, 1, 1, 2, 2, 2, 4, 0, 0};
  BOOST_TEST(x.grad().to_vector() == expected, boost::test_tools::per_element());
  // Over every axis: the two global maxima (3 and 3 among [[1, 3], [3, 0]]) share it.
  const Variable y(from_vector(std::vector<double>{1, 3, 3, 0}, {2, 2}, DType::f64), true);
  max(y).backward();
  BOOST_TEST(y.grad().to_vector() == (std::vector<double>{0, 0.5, 0.5, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// ---- shape ops ----
struct ShapeOp {
  std::string name;
  Shape input;
  std::function<Variable(const Variable&)> fn;
};
std::ostream& operator<<(std::ostream& os, const ShapeOp& c) { return os << c.name << " of " << c.input; }
const std::vector<ShapeOp> kShapeOps = {
    {"reshape_(6,4)", {2, 3, 4}, [](const Variable& x) { return reshape(x, {6, 4}); }},
    {"reshape_(4,-1)", {2, 3, 4}, [](const Variable& x) { return reshape(x, {4, -1}); }},
    {"reshape_(24)", {2, 3, 4}, [](const Variable& x) { return reshape(x, {24}); }},
    {"reshape_(2,2,3)", {3, 4}, [](const Variable& x) { return reshape(x, {2, 2, 3}); }},
    {"transpose_0_2", {2, 3, 4}, [](const Variable& x) { return transpose(x, 0, 2); }},
    {"transpose_-1_-2", {2, 3, 4}, [](const Variable& x) { return transpose(x, -1, -2); }},
    {"transpose_0_1", {3, 4}, [](const Variable& x) { return transpose(x, 0, 1); }},
    {"permute_2_0_1", {2, 3, 4}, [](const Variable& x) { return permute(x, {2, 0, 1}); }},
    {"permute_-1_0_1", {2, 3, 4}, [](const Variable& x) { return permute(x, {-1, 0, 1}); }},
    {"permute_1_0_2", {2, 3, 4}, [](const Variable& x) { return permute(x, {1, 0, 2}); }},
    {"slice_1_0_3_step2", {2, 3, 4}, [](const Variable& x) { return slice(x, 1, 0, 3, 2); }},
    {"slice_-1_1_4_step2", {2, 3, 4}, [](const Variable& x) { return slice(x, -1, 1, 4, 2); }},
    {"slice_0_-1_2", {2, 3, 4}, [](const Variable& x) { return slice(x, 0, -1, 2); }},
    {"slice_2_-3_100", {2, 3, 4}, [](const Variable& x) { return slice(x, 2, -3, 100); }},
    {"slice_0_1_5_step3", {5}, [](const Variable& x) { return slice(x, 0, 1, 5, 3); }},
    {"narrow_2_1_2", {2, 3, 4}, [](const Variable& x) { return narrow(x, 2, 1, 2); }},
    {"narrow_0_1_1", {2, 3, 4}, [](const Variable& x) { return narrow(x, 0, 1, 1); }},
    {"narrow_-2_0_2", {2, 3, 4}, [](const Variable& x) { return narrow(x, -2, 0, 2); }},
    {"unsqueeze_0", {2, 3, 4}, [](const Variable& x) { return unsqueeze(x, 0); }},
    {"unsqueeze_-1", {2, 3, 4}, [](const Variable& x) { return unsqueeze(x, -1); }},
    {"unsqueeze_2", {2, 3, 4}, [](const Variable& x) { return unsqueeze(x, 2); }},
    {"squeeze_1", {2, 1, 4}, [](const Variable& x) { return squeeze(x, 1); }},
    {"squeeze_-2", {2, 1, 4}, [](const Variable& x) { return squeeze(x, -2); }},
    {"squeeze_0", {1, 3}, [](const Variable& x) { return squeeze(x, 0); }},
    {"broadcast_to_(2,3,4)", {3, 1}, [](const Variable& x) { return broadcast_to(x, {2, 3, 4}); }},
    {"broadcast_to_(3,4)", {4}, [](const Variable& x) { return broadcast_to(x, {3, 4}); }},
    {"broadcast_to_from_scalar", {}, [](const Variable& x) { return broadcast_to(x, {2, 2}); }},
    {"expand_(1,4)_(2,3,4)", {1, 4}, [](const Variable& x) { return expand(x, {2, 3, 4}); }},
    {"contiguous_2d", {3, 4}, [](const Variable& x) { return contiguous(x); }},
    {"contiguous_3d", {2, 3, 4}, [](const Variable& x) { return contiguous(x); }},
    // A view of a view of a view: each backward undoes its own step.
    {"chain", {2, 3, 4}, [](const Variable& x) { return reshape(slice(transpose(x, 0, 2), 0, 1, 4, 2), {-1}); }},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(ops_shape)

BOOST_DATA_TEST_CASE(shape_ops_pass_gradcheck, bdata::make(kShapeOps) * bdata::make(kLayouts), op, layout) {
  const Variable x = leaf(op.input, layout, Fill::normal, 9);
  check_op([&](const std::vector<Variable>& in) { return op.fn(in[0]); }, {x});
}

BOOST_AUTO_TEST_CASE(contiguous_makes_contiguous_copies_only_of_views) {
  const Variable x = leaf({3, 4}, Layout::transposed, Fill::normal, 10);
  const Variable c = contiguous(x);
  BOOST_TEST(c.value().is_contiguous());
  BOOST_TEST(!c.is_leaf());
  const Variable y = leaf({3, 4}, Layout::contiguous, Fill::normal, 10);
  BOOST_TEST(contiguous(y).id() == y.id());
}

BOOST_DATA_TEST_CASE(concat_passes_gradcheck, bdata::make(kLayouts) * bdata::make(std::vector<int64_t>{0, 1, 2, -1}),
                     layout, axis) {
  // Parts of sizes 1, 2 and 3 along `axis`, in three different layouts.
  std::vector<Variable> parts;
  for (int64_t i = 0; i < 3; ++i) {
    Shape s{2, 3, 4};
    s[axis] = i + 1;
    parts.push_back(leaf(s, i == 1 ? layout : Layout::contiguous, Fill::normal, 11 + static_cast<uint64_t>(i)));
  }
  check_op([&](const std::vector<Variable>& in) { return concat(in, axis); }, parts);
  // A part that does not require grad still contributes its values.
  const Variable constant(fill_values({2, 3, 4}, Fill::normal, 14), false);
  check_op([&](const std::vector<Variable>& in) { return concat({in[0], constant, in[1]}, axis); },
           {parts[0], parts[2]});
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// ---- matmul ----
const std::vector<ShapePair> kMatmulShapes = {
    {{3, 4}, {4, 5}},          // 2-D
    {{1, 4}, {4, 1}},          // row times column
    {{2, 3, 4}, {2, 4, 5}},    // batched
    {{2, 3, 4}, {4, 5}},       // (B, T, C) @ (C, N)
    {{3, 4}, {2, 4, 5}},       // a matrix against a batch
    {{2, 1, 3, 4}, {3, 4, 2}}, // batch dimensions broadcast both ways
};
const std::vector<LayoutPair> kMatmulLayouts = {{Layout::contiguous, Layout::contiguous},
                                                {Layout::transposed, Layout::contiguous},
                                                {Layout::contiguous, Layout::transposed},
                                                {Layout::transposed, Layout::transposed},
                                                {Layout::strided, Layout::strided}};

}  // namespace

BOOST_AUTO_TEST_SUITE(ops_matmul)

BOOST_DATA_TEST_CASE(matmul_passes_gradcheck, bdata::make(kMatmulShapes) * bdata::make(kMatmulLayouts), shapes,
                     layouts) {
  const Variable a = leaf(shapes.a, layouts.a, Fill::normal, 15, "a");
  const Variable b = leaf(shapes.b, layouts.b, Fill::normal, 16, "b");
  check_op([](const std::vector<Variable>& in) { return matmul(in[0], in[1]); }, {a, b});
}

BOOST_AUTO_TEST_CASE(matmul_with_a_constant_operand) {
  const Variable a = leaf({2, 3, 4}, Layout::contiguous, Fill::normal, 17, "a");
  const Variable w(fill_values({4, 5}, Fill::normal, 18), false);
  check_op([&](const std::vector<Variable>& in) { return matmul(in[0], w); }, {a});
  const Variable b = leaf({4, 5}, Layout::transposed, Fill::normal, 19, "b");
  const Variable x(fill_values({2, 3, 4}, Fill::normal, 20), false);
  check_op([&](const std::vector<Variable>& in) { return matmul(x, in[0]); }, {b});
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// ---- masking ----
// 1 where (flat index % 3 == 1): some masked, most not (a one-element mask masks nothing, so
// the gradient still reaches x).
Tensor pattern_mask(const Shape& shape, DType dtype) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 1 ? 1.0 : 0.0;
  return from_vector(v, shape, dtype);
}

struct WhereShapes {
  Shape cond, a, b;
};
std::ostream& operator<<(std::ostream& os, const WhereShapes& w) { return os << w.cond << " " << w.a << " " << w.b; }
const std::vector<WhereShapes> kWhereShapes = {
    {{3, 4}, {3, 4}, {3, 4}}, {{1, 4}, {3, 4}, {4}}, {{3, 1}, {1, 4}, {3, 4}}, {{2, 3, 4}, {3, 4}, {}}};

}  // namespace

BOOST_AUTO_TEST_SUITE(ops_masking)

BOOST_DATA_TEST_CASE(masked_fill_passes_gradcheck,
                     bdata::make(std::vector<Shape>{{3, 4}, {1, 4}, {3, 1}, {4}, {}}) * bdata::make(kLayouts), mask_shape,
                     layout) {
  const Variable x = leaf({3, 4}, layout, Fill::normal, 21);
  const Tensor mask = pattern_mask(mask_shape, DType::f32);  // any dtype works as a mask
  check_op([&](const std::vector<Variable>& in) { return masked_fill(in[0], mask, 7.0); }, {x});
  const std::vector<double> y = masked_fill(x, mask, 7.0).value().to_vector();
  const std::vector<double> m = mask.to(DType::f64).expand({3, 4}).to_vector();
  const std::vector<double> xv = x.value().to_vector();
  for (size_t i = 0; i < y.size(); ++i) BOOST_TEST(y[i] == (m[i] != 0 ? 7.0 : xv[i]));
}

BOOST_DATA_TEST_CASE(where_passes_gradcheck, bdata::make(kWhereShapes) * bdata::make(kLayoutPairs), shapes, layouts) {
  const Variable a = leaf(shapes.a, layouts.a, Fill::normal, 22, "a");
  const Variable b = leaf(shapes.b, layouts.b, Fill::normal, 23, "b");
  const Tensor cond = pattern_mask(shapes.cond, DType::f64);
  check_op([&](const std::vector<Variable>& in) { return where(cond, in[0], in[1]); }, {a, b});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ops_softmax)

BOOST_DATA_TEST_CASE(softmax_and_log_softmax_pass_gradcheck,
                     bdata::make(std::vector<int64_t>{0, 1, 2, -1, -2}) * bdata::make(kLayouts), axis, layout) {
  const Variable x = leaf({2, 3, 4}, layout, Fill::normal, 24);
  check_op([&](const std::vector<Variable>& in) { return softmax(in[0], axis); }, {x});
  check_op([&](const std::vector<Variable>& in) { return log_softmax(in[0], axis); }, {x});
}

BOOST_AUTO_TEST_CASE(fully_masked_rows_give_zero_output_and_zero_finite_gradient) {
  const Variable x = leaf({3, 4}, Layout::transposed, Fill::normal, 25);
  Tensor mask = zeros({3, 4}, DType::f64);
  mask.narrow(0, 1, 1).fill_(1.0);  // row 1 entirely masked
  mask.set({2, 0}, 1.0);
  const double inf = std::numeric_limits<double>::infinity();
  const auto fn = [&](const std::vector<Variable>& in) { return softmax(masked_fill(in[0], mask, -inf), -1); };
  const Variable y = fn({x});
  BOOST_TEST(y.value().narrow(0, 1, 1).to_vector() == std::vector<double>(4, 0.0));
  check_gradients(fn, {x});
  const Variable w(fill_values({3, 4}, Fill::normal, 26), false);
  sum(mul(y, w)).backward();
  for (double g : x.grad().to_vector()) BOOST_TEST(std::isfinite(g));
  BOOST_TEST(x.grad().narrow(0, 1, 1).to_vector() == std::vector<double>(4, 0.0));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ops_large)

// Inputs too big for the full Jacobian: gradcheck compares random projections instead.
BOOST_AUTO_TEST_CASE(large_inputs_pass_in_projection_mode) {
  const Variable a = leaf({4, 16, 32}, Layout::contiguous, Fill::normal, 27, "a");
  const Variable w = leaf({32, 24}, Layout::transposed, Fill::normal, 28, "w");
  const auto fn = [](const std::vector<Variable>& in) {
    return log_softmax(gelu(matmul(in[0], in[1])), -1) * sigmoid(sum(in[0], {-1}, true));
  };
  const GradcheckResult r = gradcheck(fn, {a, w});
  BOOST_TEST(!r.full_jacobian);
  BOOST_TEST(r.ok, r.report);
  BOOST_TEST(r.comparisons >= 12);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
