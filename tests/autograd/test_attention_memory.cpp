// What scaled_dot_product_attention keeps for its backward: two softmax statistics per query
// row, not the (B, H, Tq, Tk) weights. The backward recomputes each slice's weights from q, k,
// keep, bias and those statistics; here it is held bit for bit to the backward that reads the
// forward's weights (on both kernel paths, both dtypes, with masks, a fully masked row, a bias
// and dropout), and the op is held to keeping less than a fraction of the weights' bytes.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <cstring>
#include <limits>
#include <ostream>
#include <vector>

#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/storage.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

using kernels::AttentionPath;

// Same shape and the same bytes element by element (so -0 differs from +0).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), static_cast<size_t>(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

struct Case {
  int64_t B, H, Tq, Tk, Dk, Dv;
  bool permuted;  // q, k, v, g as (B, T, H, D) memory permuted to (B, H, T, D), as in the layer
  bool mask, bias;
  double dropout;
};
std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << "B" << c.B << " H" << c.H << " Tq" << c.Tq << " Tk" << c.Tk << " Dk" << c.Dk << " Dv" << c.Dv
            << (c.permuted ? " permuted" : "") << (c.mask ? " mask" : "") << (c.bias ? " bias" : "")
            << " p=" << c.dropout;
}

const std::vector<Case> kCases = {
    {1, 1, 1, 1, 1, 1, false, false, false, 0.0},
    {2, 3, 5, 7, 3, 9, false, true, false, 0.0},
    {2, 2, 16, 16, 16, 16, true, true, true, 0.3},
    {1, 2, 17, 33, 9, 17, true, true, true, 0.0},
    {2, 2, 64, 64, 32, 32, true, true, false, 0.1},  // above the direct loops' size on `automatic`
};

Tensor operand(const Case& c, int64_t rows, int64_t cols, DType dtype, Generator& gen) {
  if (c.permuted) return normal(Shape{c.B, rows, c.H, cols}, 0.0, 1.0, gen, dtype).permute({0, 2, 1, 3});
  return normal(Shape{c.B, c.H, rows, cols}, 0.0, 1.0, gen, dtype);
}

// (B, 1, Tq, Tk): query i sees keys 0..i, except that query 0 of batch 0 sees nothing.
Tensor causal_keep(int64_t B, int64_t Tq, int64_t Tk, DType dtype) {
  std::vector<double> keep(static_cast<size_t>(B * Tq * Tk), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < Tq; ++i) {
      for (int64_t j = 0; j <= i && j < Tk; ++j) keep[static_cast<size_t>((b * Tq + i) * Tk + j)] = 1.0;
    }
  }
  for (int64_t j = 0; j < Tk; ++j) keep[static_cast<size_t>(j)] = 0.0;
  return from_vector(keep, Shape{B, 1, Tq, Tk}, dtype);
}

BOOST_AUTO_TEST_SUITE(attention_saved_state)

BOOST_DATA_TEST_CASE(recomputed_weights_give_the_same_gradients_bit_for_bit, bdata::make(kCases), c) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (AttentionPath path : {AttentionPath::automatic, AttentionPath::direct, AttentionPath::blas}) {
      Generator gen(77);
      const Tensor q = operand(c, c.Tq, c.Dk, dtype, gen), k = operand(c, c.Tk, c.Dk, dtype, gen);
      const Tensor v = operand(c, c.Tk, c.Dv, dtype, gen), g = operand(c, c.Tq, c.Dv, dtype, gen);
      AttentionMask keep;
      Tensor bias;
      if (c.mask) keep = AttentionMask::keep(causal_keep(c.B, c.Tq, c.Tk, dtype));
      if (c.bias) bias = normal(Shape{1, c.H, c.Tq, c.Tk}, 0.0, 1.0, gen, dtype);
      const kernels::DropoutMask dropout{c.dropout, gen.next_stream()};
      const double scale = 0.37;
      const kernels::AttentionForward f = kernels::attention_forward(q, k, v, keep, bias, scale, dropout, path);
      const kernels::AttentionGrads from_weights =
          kernels::attention_backward(g, q, k, v, f.weights, scale, dropout, true, true, true, true, path);
      const kernels::AttentionGrads recomputed = kernels::attention_backward(
          g, q, k, v, keep, bias, f.row_max, f.row_sum, scale, dropout, true, true, true, true, path);
      BOOST_TEST(same_bits(from_weights.dq, recomputed.dq));
      BOOST_TEST(same_bits(from_weights.dk, recomputed.dk));
      BOOST_TEST(same_bits(from_weights.dv, recomputed.dv));
      BOOST_TEST(same_bits(from_weights.dscores, recomputed.dscores));
      // Only dv, and only dq: the weights are still rebuilt when the score path is skipped.
      BOOST_TEST(same_bits(kernels::attention_backward(g, q, k, v, f.weights, scale, dropout, false, false, true,
                                                       false, path).dv,
                           kernels::attention_backward(g, q, k, Tensor(), keep, bias, f.row_max, f.row_sum, scale,
                                                       dropout, false, false, true, false, path).dv));
      BOOST_TEST(same_bits(from_weights.dq, kernels::attention_backward(g, q, k, v, keep, bias, f.row_max, f.row_sum,
                                                                        scale, dropout, true, false, false, false,
                                                                        path).dq));
      if (c.mask) {  // the row that sees nothing: statistics -inf and 0, zero gradients
        BOOST_TEST(f.row_max.at({0, 0, 0}) == -std::numeric_limits<double>::infinity());
        BOOST_TEST(f.row_sum.at({0, 0, 0}) == 0.0);
        const Tensor dq = recomputed.dq.narrow(0, 0, 1).narrow(2, 0, 1);
        BOOST_TEST(max_abs_diff(dq, zeros(dq.shape(), dtype)) == 0.0);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(backward_refuses_statistics_of_another_shape) {
  Generator gen(5);
  const Tensor q = normal({2, 3, 4, 8}, 0.0, 1.0, gen), k = normal({2, 3, 6, 8}, 0.0, 1.0, gen);
  const Tensor v = normal({2, 3, 6, 5}, 0.0, 1.0, gen), g = normal({2, 3, 4, 5}, 0.0, 1.0, gen);
  const Tensor stats = zeros({2, 3, 6});  // (B, H, Tk) instead of (B, H, Tq)
  AG_CHECK_THROWS_WITH(kernels::attention_backward(g, q, k, v, AttentionMask(), Tensor(), stats, stats, 0.5,
                                                   kernels::DropoutMask{}, true, true, true, false),
                       std::invalid_argument, "scaled_dot_product_attention_backward", "(2, 3, 6)", "(2, 3, 4, 8)");
}

// The large GPT benchmark's attention keeps B * H * T * T floats of weights per layer if the
// backward reads them; the statistics are B * H * T * 2. After the forward (the returned
// weights dropped, as MultiHeadAttention does without need_weights), the bytes still live
// beyond the output must be far below the weights' size. AddressSanitizer builds have no block
// cache but count live bytes the same way.
BOOST_AUTO_TEST_CASE(forward_keeps_far_less_than_the_weights_for_backward) {
  const int64_t B = 2, H = 4, T = 256, D = 32;
  const Variable q = randn_leaf({B, H, T, D}, 1, "q", DType::f32), k = randn_leaf({B, H, T, D}, 2, "k", DType::f32);
  const Variable v = randn_leaf({B, H, T, D}, 3, "v", DType::f32);
  const Variable bias(zeros({1, H, T, T}), true, "bias");
  const AttentionMask keep = AttentionMask::causal(T);
  const std::size_t weights_bytes = static_cast<std::size_t>(B * H * T * T) * sizeof(float);  // 2 MiB
  const std::size_t output_bytes = static_cast<std::size_t>(B * H * T * D) * sizeof(float);   // 256 KiB
  AttentionOptions o;
  o.training = true;
  o.dropout = 0.1;
  const std::size_t before = memory_stats().live;
  AttentionResult r = scaled_dot_product_attention(q, k, v, keep, bias, o);
  BOOST_REQUIRE(r.weights.shape() == (Shape{B, H, T, T}));  // still returned to the caller
  r.weights = Tensor();
  const std::size_t kept = memory_stats().live - before;
  BOOST_TEST_MESSAGE("kept " << kept << " bytes after the forward; the weights are " << weights_bytes);
  BOOST_TEST(kept >= output_bytes);
  BOOST_TEST(kept - output_bytes < weights_bytes / 16);
  sum(r.output).backward();  // and the backward still runs from what was kept
  for (const Variable* x : {&q, &k, &v, &bias}) BOOST_TEST(x->grad().defined());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
