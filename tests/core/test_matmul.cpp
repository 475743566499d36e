// Batched matmul against a naive triple loop: plain, transposed operands (read by BLAS with
// CblasTrans), other strided operands, batch broadcasting, in f32 and f64.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <cblas.h>

#include <cmath>
#include <limits>

#include "attograd/core/gemm.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

// How an operand of logical shape (..., R, C) is laid out in memory.
enum class Layout { contiguous, transposed, strided };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::transposed: return "transposed";
    case Layout::strided: return "strided";
  }
  return "?";
}

// Random values of logical shape `shape`, laid out as asked: `transposed` is the .t() view of a
// (..., C, R) tensor; `strided` is every other column of a wider tensor (neither layout BLAS
// reads directly, so the kernel must copy).
Tensor operand(const Shape& shape, Layout layout, uint64_t seed, DType dtype) {
  Generator gen(seed);
  if (layout == Layout::contiguous) return normal(shape, 0.0, 1.0, gen, dtype);
  Shape wide = shape;
  if (layout == Layout::transposed) {
    std::swap(wide[-1], wide[-2]);
    const Tensor t = normal(wide, 0.0, 1.0, gen, dtype).t();
    BOOST_REQUIRE(!t.is_contiguous() || shape[-1] == 1 || shape[-2] == 1);
    return t;
  }
  wide[-1] = 2 * shape[-1];
  return normal(wide, 0.0, 1.0, gen, dtype).slice(-1, 0, wide[-1], 2);
}

// out[b, i, j] = sum_k a[b, i, k] * b[b, k, j] with explicit broadcasting of the batch index.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const int64_t m = a.shape()[-2], k = a.shape()[-1], n = b.shape()[-1];
  const Shape batch = broadcast_shapes(Shape(std::vector<int64_t>(a.shape().begin(), a.shape().end() - 2)),
                                       Shape(std::vector<int64_t>(b.shape().begin(), b.shape().end() - 2)));
  Shape a_full = batch, b_full = batch, out_shape = batch;
  a_full.push_back(m), a_full.push_back(k);
  b_full.push_back(k), b_full.push_back(n);
  out_shape.push_back(m), out_shape.push_back(n);
  const std::vector<double> va = a.expand(a_full).to_vector(), vb = b.expand(b_full).to_vector();
  std::vector<double> out(static_cast<size_t>(out_shape.numel()), 0.0);
  for (int64_t bi = 0; bi < batch.numel(); ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          s += va[static_cast<size_t>((bi * m + i) * k + p)] * vb[static_cast<size_t>((bi * k + p) * n + j)];
        }
        out[static_cast<size_t>((bi * m + i) * n + j)] = s;
      }
    }
  }
  return from_vector(out, out_shape, DType::f64);
}

struct MatmulCase {
  Shape a, b;
  Layout la, lb;
};
std::ostream& operator<<(std::ostream& os, const MatmulCase& c) {
  return os << c.a << " " << layout_name(c.la) << " @ " << c.b << " " << layout_name(c.lb);
}

const std::vector<MatmulCase> kCases = {
    {{3, 4}, {4, 5}, Layout::contiguous, Layout::contiguous},
    {{3, 4}, {4, 5}, Layout::transposed, Layout::contiguous},
    {{3, 4}, {4, 5}, Layout::contiguous, Layout::transposed},
    {{3, 4}, {4, 5}, Layout::transposed, Layout::transposed},
    {{3, 4}, {4, 5}, Layout::strided, Layout::strided},
    {{1, 4}, {4, 1}, Layout::contiguous, Layout::contiguous},
    {{1, 4}, {4, 1}, Layout::transposed, Layout::transposed},
    {{5, 1}, {1, 3}, Layout::contiguous, Layout::transposed},
    {{2, 3, 4}, {2, 4, 5}, Layout::contiguous, Layout::contiguous},
    {{2, 3, 4}, {2, 4, 5}, Layout::transposed, Layout::transposed},
    {{2, 3, 4}, {4, 5}, Layout::contiguous, Layout::contiguous},     // (B,T,C) @ (C,N)
    {{2, 3, 4}, {4, 5}, Layout::transposed, Layout::transposed},
    {{3, 4}, {2, 4, 5}, Layout::contiguous, Layout::transposed},     // matrix against a batch
    {{2, 1, 3, 4}, {3, 4, 2}, Layout::contiguous, Layout::contiguous},  // batch broadcast both ways
    {{2, 1, 3, 4}, {1, 3, 4, 2}, Layout::transposed, Layout::strided},
    {{1, 3, 4}, {2, 4, 5}, Layout::strided, Layout::transposed},
};

const std::vector<DType> kDTypes = {DType::f32, DType::f64};

}  // namespace

BOOST_AUTO_TEST_SUITE(kernels_matmul)

BOOST_DATA_TEST_CASE(matches_a_naive_triple_loop, bdata::make(kCases) * bdata::make(kDTypes), c, dtype) {
  const Tensor a = operand(c.a, c.la, 100, dtype);
  const Tensor b = operand(c.b, c.lb, 200, dtype);
  const Tensor got = kernels::matmul(a, b);
  const Tensor want = naive_matmul(a, b);
  BOOST_TEST(got.dtype() == dtype);
  BOOST_TEST(got.is_contiguous());
  const double tol = dtype == DType::f32 ? 1e-5 : 1e-13;
  BOOST_TEST(max_abs_diff(got, want) <= tol, c << " " << dtype << ": " << max_abs_diff(got, want));
}

BOOST_AUTO_TEST_CASE(f32_and_f64_agree) {
  const Tensor a = operand({2, 6, 7}, Layout::transposed, 3, DType::f64);
  const Tensor b = operand({7, 5}, Layout::contiguous, 4, DType::f64);
  const Tensor d = kernels::matmul(a, b);
  const Tensor f = kernels::matmul(a.to(DType::f32), b.to(DType::f32));
  BOOST_TEST(f.dtype() == DType::f32);
  BOOST_TEST(max_abs_diff(f, d) <= 1e-5);
}

BOOST_AUTO_TEST_CASE(hand_computed_product) {
  const Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  const Tensor b = from_vector(std::vector<double>{7, 8, 9, 10, 11, 12}, {3, 2}, DType::f64);
  BOOST_TEST(kernels::matmul(a, b).to_vector() == (std::vector<double>{58, 64, 139, 154}));
  BOOST_TEST(kernels::matmul(b.t(), a.t()).to_vector() == (std::vector<double>{58, 139, 64, 154}));
}

BOOST_AUTO_TEST_CASE(empty_inner_dimension_gives_zeros) {
  const Tensor a = zeros({2, 0}, DType::f64);
  const Tensor b = zeros({0, 3}, DType::f64);
  const Tensor c = kernels::matmul(a, b);
  BOOST_TEST(c.shape() == Shape({2, 3}));
  BOOST_TEST(c.to_vector() == std::vector<double>(6, 0.0));
}

BOOST_AUTO_TEST_CASE(expanded_operand_is_read_correctly) {
  // A stride-0 matrix (every row the same) is not something BLAS can take as is.
  const Tensor row = from_vector(std::vector<double>{1, 2, 3}, {1, 3}, DType::f64);
  const Tensor a = row.expand({4, 3});
  const Tensor b = operand({3, 2}, Layout::contiguous, 9, DType::f64);
  BOOST_TEST(max_abs_diff(kernels::matmul(a, b), naive_matmul(a, b)) <= 1e-13);
}

// The fused bias: every row of every batch item starts as the bias (contiguous or a strided
// view), then the product is added.
BOOST_DATA_TEST_CASE(bias_is_added_to_every_row, bdata::make(kDTypes), dtype) {
  for (const bool strided_bias : {false, true}) {
    const Tensor a = operand({2, 3, 4}, Layout::contiguous, 41, dtype), b = operand({4, 5}, Layout::transposed, 42, dtype);
    Generator gen(43);
    const Tensor bias = strided_bias ? normal({10}, 0.0, 1.0, gen, dtype).slice(0, 0, 10, 2)
                                     : normal({5}, 0.0, 1.0, gen, dtype);
    const Tensor got = kernels::matmul(a, b, bias);
    const Tensor expected = kernels::add(naive_matmul(a, b), bias.to(DType::f64));
    BOOST_TEST(max_abs_diff(got, expected) < (dtype == DType::f32 ? 1e-5 : 1e-12), "strided bias " << strided_bias);
  }
}

// out += a b in place: against out + the naive product, for every layout and batch case.
BOOST_DATA_TEST_CASE(matmul_add_accumulates_into_out, bdata::make(kCases) * bdata::make(kDTypes), c, dtype) {
  const Tensor a = operand(c.a, c.la, 31, dtype), b = operand(c.b, c.lb, 32, dtype);
  const Tensor product = naive_matmul(a, b);
  Generator gen(33);
  Tensor out = normal(product.shape(), 0.0, 1.0, gen, dtype);
  const Tensor before = out.clone();
  const void* where = out.raw_data();
  kernels::matmul_add_(out, a, b);
  BOOST_TEST(out.raw_data() == where);  // in place
  const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
  BOOST_TEST(max_abs_diff(out, kernels::add(before.to(DType::f64), product)) < tol);
}

BOOST_AUTO_TEST_CASE(matmul_add_with_empty_inner_dimension_leaves_out_alone) {
  Tensor out = full({2, 3}, 1.5, DType::f64);
  kernels::matmul_add_(out, zeros({2, 0}, DType::f64), zeros({0, 3}, DType::f64));
  BOOST_TEST(out.to_vector() == std::vector<double>(6, 1.5));
}

// out = a b over whatever out held (NaN here): the bits of matmul(a, b), in out's memory.
BOOST_DATA_TEST_CASE(matmul_into_overwrites_out_with_matmuls_bits, bdata::make(kCases) * bdata::make(kDTypes), c, dtype) {
  const Tensor a = operand(c.a, c.la, 34, dtype), b = operand(c.b, c.lb, 35, dtype);
  const Tensor expected = kernels::matmul(a, b);
  Tensor out = full(expected.shape(), std::nan(""), dtype);
  const void* where = out.raw_data();
  kernels::matmul_into_(out, a, b);
  BOOST_TEST(out.raw_data() == where);  // in place
  BOOST_TEST(out.to_vector() == expected.to_vector(), boost::test_tools::per_element());
  Tensor empty_inner = full({2, 3}, std::nan(""), dtype);  // an empty sum is 0, not out's contents
  kernels::matmul_into_(empty_inner, zeros({2, 0}, dtype), zeros({0, 3}, dtype));
  BOOST_TEST(empty_inner.to_vector() == std::vector<double>(6, 0.0));
  Tensor strided = zeros({3, 2}, dtype).t();
  AG_CHECK_THROWS_WITH(kernels::matmul_into_(strided, zeros({2, 4}, dtype), zeros({4, 3}, dtype)),
                       std::invalid_argument, "matmul_into_", "non-contiguous");
}

BOOST_AUTO_TEST_CASE(matmul_add_rejects_a_wrong_out) {
  const Tensor a = zeros({2, 4}, DType::f32), b = zeros({4, 3}, DType::f32);
  Tensor wrong_shape = zeros({3, 2}, DType::f32);
  AG_CHECK_THROWS_WITH(kernels::matmul_add_(wrong_shape, a, b), std::invalid_argument, "matmul_add_", "(2, 3)",
                       "(3, 2)", "a=(2, 4)", "b=(4, 3)");
  Tensor wrong_dtype = zeros({2, 3}, DType::f64);
  AG_CHECK_THROWS_WITH(kernels::matmul_add_(wrong_dtype, a, b), std::invalid_argument, "matmul_add_", "f32", "f64");
  Tensor strided = zeros({3, 2}, DType::f32).t();
  AG_CHECK_THROWS_WITH(kernels::matmul_add_(strided, a, b), std::invalid_argument, "matmul_add_", "non-contiguous");
  Tensor fine = zeros({2, 3}, DType::f32);
  AG_CHECK_THROWS_WITH(kernels::matmul_add_(fine, a, zeros({5, 3}, DType::f32)), std::invalid_argument, "matmul",
                       "inner dimensions", "(2, 4)", "(5, 3)");
}

BOOST_AUTO_TEST_SUITE_END()

// ag::gemm sends a product with one row or one column of C to a matrix-vector routine: its own
// for a contiguous float32 row times a B lying (n, k) (decoding a token through a Linear), BLAS's
// gemv for the rest. Every flag pair, operands and C with leading dimensions wider than the
// matrix (the padding must be skipped and left alone), alpha != 1, and beta 0 over NaN (C's
// contents ignored) as well as beta 1 (added to). Where the vector lies contiguous and BLAS
// takes the product, the result is also held bit for bit to gemv called directly: sgemm gives
// other bits there, so that check finds a lost route.
BOOST_AUTO_TEST_SUITE(gemm_with_one_row_or_column)

template <typename T>
void check_vector_product(int64_t m, int64_t n, int64_t k, Transpose ta, Transpose tb, T beta) {
  constexpr int64_t kPad = 3;
  // op(A) (m, k) lies (m, k) or, transposed, (k, m); likewise op(B) (k, n).
  const int64_t a_rows = ta == Transpose::no ? m : k, a_cols = ta == Transpose::no ? k : m;
  const int64_t b_rows = tb == Transpose::no ? k : n, b_cols = tb == Transpose::no ? n : k;
  const int64_t lda = a_cols + kPad, ldb = b_cols + kPad, ldc = n + kPad;
  Generator gen(static_cast<uint64_t>(m * 100 + n * 10 + k));
  const std::vector<double> va = normal({a_rows * lda}, 0.0, 1.0, gen, DType::f64).to_vector();
  const std::vector<double> vb = normal({b_rows * ldb}, 0.0, 1.0, gen, DType::f64).to_vector();
  const std::vector<double> vc = normal({m * ldc}, 0.0, 1.0, gen, DType::f64).to_vector();
  std::vector<T> a(va.begin(), va.end()), b(vb.begin(), vb.end()), c(vc.begin(), vc.end());
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= n) c[static_cast<size_t>(i * ldc + j)] = nan;  // padding: must stay untouched
      else if (beta == T(0)) c[static_cast<size_t>(i * ldc + j)] = nan;
    }
  }
  const std::vector<T> c_before = c;
  const T alpha = T(0.5);
  gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  const auto at_a = [&](int64_t i, int64_t p) { return ta == Transpose::no ? va[size_t(i * lda + p)] : va[size_t(p * lda + i)]; };
  const auto at_b = [&](int64_t p, int64_t j) { return tb == Transpose::no ? vb[size_t(p * ldb + j)] : vb[size_t(j * ldb + p)]; };
  // When the vector lies contiguous (op(A)'s row not transposed, op(B)'s column transposed),
  // the same product through gemv called here gives the bits gemm must give. (gemv's bits
  // depend on the vector's stride too, so strided vectors are held to the loop only.)
  const bool ours = std::is_same_v<T, float> && m == 1 && tb == Transpose::yes && ta == Transpose::no;
  const bool contiguous_vector = !ours && (m == 1 ? ta == Transpose::no : tb == Transpose::yes);
  std::vector<T> want_bits(c_before);
  for (int64_t i = 0; beta == T(0) && i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) want_bits[size_t(i * ldc + j)] = T(0);
  }
  if (contiguous_vector) {
    const bool row = m == 1;
    const T* mat = row ? b.data() : a.data();
    const T* vec = row ? a.data() : b.data();
    const int64_t ld = row ? ldb : lda;
    // row: c = op(B)^T a, B lying (k, n) or (n, k); column: c = op(A) b, A lying (m, k) or (k, m)
    const bool lies_transposed = row ? tb == Transpose::no : ta == Transpose::yes;
    const int64_t rows = row ? (tb == Transpose::no ? k : n) : (ta == Transpose::no ? m : k);
    const int64_t cols = row ? (tb == Transpose::no ? n : k) : (ta == Transpose::no ? k : m);
    const CBLAS_TRANSPOSE t = lies_transposed ? CblasTrans : CblasNoTrans;
    const int incy = row ? 1 : int(ldc);
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemv(CblasRowMajor, t, int(rows), int(cols), alpha, mat, int(ld), vec, 1, beta, want_bits.data(), incy);
    } else {
      cblas_dgemv(CblasRowMajor, t, int(rows), int(cols), alpha, mat, int(ld), vec, 1, beta, want_bits.data(), incy);
    }
  }
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i * ldc + j);
      if (j >= n) {
        BOOST_TEST(std::isnan(static_cast<double>(c[at])), "padding written at (" << i << ", " << j << ")");
        continue;
      }
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += at_a(i, p) * at_b(p, j);
      want *= static_cast<double>(alpha);
      if (beta != T(0)) want += static_cast<double>(beta) * static_cast<double>(c_before[at]);
      BOOST_TEST(std::abs(static_cast<double>(c[at]) - want) <= tol * (1 + std::abs(want)),
                 "(" << i << ", " << j << "): " << c[at] << " want " << want);
      if (contiguous_vector) BOOST_TEST(c[at] == want_bits[at], "(" << i << ", " << j << "): not gemv's bits");
    }
  }
}

BOOST_AUTO_TEST_CASE(match_a_double_loop_for_every_flag_pair) {
  struct Dims {
    int64_t m, n, k;
  };
  for (const Dims d : {Dims{1, 7, 5}, Dims{6, 1, 5}, Dims{1, 1, 9}, Dims{1, 40, 33}, Dims{37, 1, 20}, Dims{1, 13, 70}}) {
    for (const Transpose ta : {Transpose::no, Transpose::yes}) {
      for (const Transpose tb : {Transpose::no, Transpose::yes}) {
        BOOST_TEST_CONTEXT("m " << d.m << " n " << d.n << " k " << d.k << " ta " << (ta == Transpose::yes)
                                << " tb " << (tb == Transpose::yes)) {
          check_vector_product<float>(d.m, d.n, d.k, ta, tb, 0.0f);
          check_vector_product<float>(d.m, d.n, d.k, ta, tb, 1.0f);
          check_vector_product<double>(d.m, d.n, d.k, ta, tb, 0.0);
          check_vector_product<double>(d.m, d.n, d.k, ta, tb, 1.0);
        }
      }
    }
  }
}

// The float32 row times B (n, k) that gemm computes itself: each element of c has the same bits
// whether the pool cuts B's rows one way, another way or not at all, and whether the element's
// row is taken with three others or alone (one row of B, n = 1); B's rows wider than k (ldb > k)
// are read up to k only.
BOOST_AUTO_TEST_CASE(a_row_times_rows_of_b_has_the_same_bits_however_it_is_split) {
  const int64_t n = 1003, k = 777, ldb = k + 5;
  Generator gen(11);
  const std::vector<double> va = normal({k}, 0.0, 1.0, gen, DType::f64).to_vector();
  std::vector<double> vb = normal({n * ldb}, 0.0, 1.0, gen, DType::f64).to_vector();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t p = k; p < ldb; ++p) vb[static_cast<size_t>(r * ldb + p)] = std::numeric_limits<double>::quiet_NaN();
  }
  const std::vector<float> a(va.begin(), va.end()), b(vb.begin(), vb.end());
  std::vector<std::vector<float>> results;
  for (int way = 0; way < 3; ++way) {
    const ThreadCount threads(way == 0 ? 1 : way == 1 ? 2 : 3);
    const MachineLoad load(way == 2 ? 1 : 0);
    std::vector<float> c(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
    gemm(Transpose::no, Transpose::yes, 1, n, k, 1.0f, a.data(), k, b.data(), ldb, 0.0f, c.data(), n);
    results.push_back(c);
  }
  BOOST_TEST(results[0] == results[1]);
  BOOST_TEST(results[0] == results[2]);
  for (int64_t r = 0; r < n; r += 97) {
    float alone = 0;
    gemm(Transpose::no, Transpose::yes, 1, 1, k, 1.0f, a.data(), k, b.data() + r * ldb, ldb, 0.0f, &alone, 1);
    BOOST_TEST(alone == results[0][static_cast<size_t>(r)], "row " << r);
    double want = 0;
    for (int64_t p = 0; p < k; ++p) want += va[static_cast<size_t>(p)] * static_cast<double>(b[static_cast<size_t>(r * ldb + p)]);
    BOOST_TEST(std::abs(results[0][static_cast<size_t>(r)] - want) <= 1e-5 * (1 + std::abs(want)), "row " << r);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
