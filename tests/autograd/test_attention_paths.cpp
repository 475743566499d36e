// The two ways kernels::attention_forward / attention_backward compute a (batch, head) slice:
// BLAS calls and the direct small_gemm loops. Both are forced on the same inputs and must agree
// within rounding (f64: 1e-12, f32: 5e-5 absolute on O(1) values: BLAS fuses multiply-adds and
// sums in another order), over edge sizes, the operand layouts each path handles differently
// (contiguous, heads permuted out of (B, T, H, D), last two dimensions transposed), keep masks
// with a fully masked row, an additive bias and dropout. The composed twin of the fused op is
// held equal to the automatic path (direct at these sizes) in tests/layers and tests/autograd.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <ostream>

#include "attograd/autograd/ops/kernels.h"
#include "attograd/core/kernels.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

using kernels::AttentionPath;

enum class Layout { contiguous, heads_permuted, transposed };

struct PathCase {
  int64_t B, H, Tq, Tk, Dk, Dv;
  Layout layout;
  bool mask, bias;
  double dropout;
};
std::ostream& operator<<(std::ostream& os, const PathCase& c) {
  return os << "B" << c.B << " H" << c.H << " Tq" << c.Tq << " Tk" << c.Tk << " Dk" << c.Dk << " Dv" << c.Dv
            << " layout" << static_cast<int>(c.layout) << (c.mask ? " mask" : "") << (c.bias ? " bias" : "")
            << " p=" << c.dropout;
}

const std::vector<PathCase> kCases = {
    {1, 1, 1, 1, 1, 1, Layout::contiguous, false, false, 0.0},
    {2, 3, 5, 7, 3, 9, Layout::contiguous, true, false, 0.0},
    {2, 2, 16, 16, 16, 16, Layout::heads_permuted, false, false, 0.0},  // the tiny benchmark's heads
    {1, 2, 17, 33, 9, 17, Layout::heads_permuted, true, true, 0.0},
    {2, 1, 8, 12, 16, 8, Layout::transposed, true, false, 0.0},
    {1, 2, 13, 5, 4, 20, Layout::transposed, false, true, 0.25},
    {2, 2, 16, 16, 16, 16, Layout::heads_permuted, true, true, 0.3},
    {1, 1, 32, 32, 32, 32, Layout::contiguous, false, false, 0.0},
};

// A (B, H, rows, cols) tensor laid out as the case says.
Tensor operand(const PathCase& c, int64_t rows, int64_t cols, DType dtype, Generator& gen) {
  switch (c.layout) {
    case Layout::contiguous: return normal(Shape{c.B, c.H, rows, cols}, 0.0, 1.0, gen, dtype);
    case Layout::heads_permuted: return normal(Shape{c.B, rows, c.H, cols}, 0.0, 1.0, gen, dtype).permute({0, 2, 1, 3});
    case Layout::transposed: return normal(Shape{c.B, c.H, cols, rows}, 0.0, 1.0, gen, dtype).transpose(2, 3);
  }
  return Tensor();
}

// (B, 1, Tq, Tk) keep mask of 0/1 with query row 0 fully masked.
Tensor keep_mask(const PathCase& c, DType dtype, Generator& gen) {
  std::vector<double> keep(static_cast<size_t>(c.B * c.Tq * c.Tk));
  const uint64_t key = gen.next_stream();
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = Generator::uniform_f64(key, i) < 0.7 ? 1.0 : 0.0;
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t j = 0; j < c.Tk; ++j) keep[static_cast<size_t>(b * c.Tq * c.Tk + j)] = 0.0;
  }
  return from_vector(keep, Shape{c.B, 1, c.Tq, c.Tk}, dtype);
}

struct Run {
  kernels::AttentionForward f;
  kernels::AttentionGrads g;
};

struct Inputs {
  Tensor q, k, v, bias, g;
  AttentionMask keep;
  kernels::DropoutMask dropout;
  double scale;
};

Inputs make_inputs(const PathCase& c, DType dtype) {
  Generator gen(2024);
  Inputs in;
  in.q = operand(c, c.Tq, c.Dk, dtype, gen);
  in.k = operand(c, c.Tk, c.Dk, dtype, gen);
  in.v = operand(c, c.Tk, c.Dv, dtype, gen);
  in.g = operand(c, c.Tq, c.Dv, dtype, gen);
  if (c.mask) in.keep = AttentionMask::keep(keep_mask(c, dtype, gen));
  if (c.bias) in.bias = normal(Shape{1, c.H, c.Tq, c.Tk}, 0.0, 1.0, gen, dtype);
  in.dropout = kernels::DropoutMask{c.dropout, gen.next_stream()};
  in.scale = 0.37;
  return in;
}

Run run(const Inputs& in, AttentionPath path) {
  Run r;
  r.f = kernels::attention_forward(in.q, in.k, in.v, in.keep, in.bias, in.scale, in.dropout, path);
  r.g = kernels::attention_backward(in.g, in.q, in.k, in.v, r.f.weights, in.scale, in.dropout, true, true, true, true,
                                    path);
  return r;
}

void check_close(const Run& a, const Run& b, double tolerance) {
  BOOST_TEST(max_abs_diff(a.f.output, b.f.output) <= tolerance);
  BOOST_TEST(max_abs_diff(a.f.weights, b.f.weights) <= tolerance);
  BOOST_TEST(max_abs_diff(a.g.dq, b.g.dq) <= tolerance);
  BOOST_TEST(max_abs_diff(a.g.dk, b.g.dk) <= tolerance);
  BOOST_TEST(max_abs_diff(a.g.dv, b.g.dv) <= tolerance);
  BOOST_TEST(max_abs_diff(a.g.dscores, b.g.dscores) <= tolerance);
}

BOOST_AUTO_TEST_SUITE(attention_kernel_paths)

BOOST_DATA_TEST_CASE(direct_and_blas_agree_f64, bdata::make(kCases), c) {
  const Inputs in = make_inputs(c, DType::f64);
  check_close(run(in, AttentionPath::direct), run(in, AttentionPath::blas), 1e-12);
}

BOOST_DATA_TEST_CASE(direct_and_blas_agree_f32, bdata::make(kCases), c) {
  const Inputs in = make_inputs(c, DType::f32);
  const Run direct = run(in, AttentionPath::direct);
  check_close(direct, run(in, AttentionPath::blas), 5e-5);
  // And the f32 direct path against f64 (BLAS) on the same values: f32 rounding only.
  check_close(direct, run(make_inputs(c, DType::f64), AttentionPath::blas), 2e-4);
}

BOOST_DATA_TEST_CASE(fully_masked_rows_are_exactly_zero_on_the_direct_path, bdata::make(kCases), c) {
  if (!c.mask) return;
  for (DType dtype : {DType::f32, DType::f64}) {
    const Run r = run(make_inputs(c, dtype), AttentionPath::direct);
    // Query row 0 of every (b, h) has no kept key: zero weights, output and gradients.
    const Tensor w = r.f.weights.narrow(2, 0, 1), o = r.f.output.narrow(2, 0, 1), dq = r.g.dq.narrow(2, 0, 1);
    BOOST_TEST(max_abs_diff(w, zeros(w.shape(), dtype)) == 0.0);
    BOOST_TEST(max_abs_diff(o, zeros(o.shape(), dtype)) == 0.0);
    BOOST_TEST(max_abs_diff(dq, zeros(dq.shape(), dtype)) == 0.0);
  }
}

// Output and q/k/v gradients are (B, H, T, D) views of (B, T, H, D) memory on both paths, so
// that multi-head attention merges heads without a copy; the values are unchanged (checked
// against the other path above and against the composed attention in tests/layers).
BOOST_AUTO_TEST_CASE(results_are_views_of_heads_interleaved_memory) {
  const PathCase c = kCases[1];  // H = 3, Tq = 5, Tk = 7: no size-1 axis hides the layout
  for (AttentionPath path : {AttentionPath::direct, AttentionPath::blas}) {
    const Run r = run(make_inputs(c, DType::f64), path);
    for (const Tensor* t : {&r.f.output, &r.g.dq, &r.g.dk, &r.g.dv}) {
      BOOST_TEST(t->shape()[1] == c.H);
      BOOST_TEST(!t->is_contiguous());
      BOOST_TEST(t->permute({0, 2, 1, 3}).is_contiguous());
    }
  }
}

// `automatic` takes the direct loops for small products and BLAS for large ones (the same bits
// as the forced path in each case). A slice's products go a block of 32 queries or keys at a
// time, so "large" is 32 x 128 x 64 = 262144 MACs for each block product here.
BOOST_AUTO_TEST_CASE(automatic_picks_direct_for_small_products_and_blas_for_large) {
  const PathCase small{2, 2, 16, 16, 16, 16, Layout::heads_permuted, false, false, 0.0};
  const PathCase large{1, 1, 128, 128, 64, 64, Layout::contiguous, false, false, 0.0};
  const Inputs s = make_inputs(small, DType::f32), l = make_inputs(large, DType::f32);
  check_close(run(s, AttentionPath::automatic), run(s, AttentionPath::direct), 0.0);
  check_close(run(l, AttentionPath::automatic), run(l, AttentionPath::blas), 0.0);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ag::testing
