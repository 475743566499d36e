// GradSink, where a node's backward puts its inputs' gradients: add_matmul (the product
// accumulated straight into an existing gradient with BLAS beta = 1) against the composed
// matmul op, with pre-filled, non-contiguous and not-yet-existing gradients, leaves and
// non-leaves, f32 and f64; a temporary handed to add() is taken over by a leaf only when
// nothing else holds it; add_rows (embedding's backward) adds a table's touched rows in place,
// bit for bit as a dense table would; shapes are checked.
#include <optional>

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

// A table's gradient through embedding, written out here in the table's own precision: the
// prefilled gradient plus, per id, the sum of its positions' rows in order.
template <typename T>
std::vector<double> expected_table_grad(const Tensor& prefill, const Indices& ids, const Tensor& g, int64_t dim,
                                        int64_t padding_idx) {
  std::vector<T> sums(static_cast<size_t>(prefill.numel()), T(0));
  const std::vector<double> gv = g.to_vector(), pv = prefill.to_vector();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (ids[i] == padding_idx) continue;
    for (int64_t j = 0; j < dim; ++j) {
      sums[static_cast<size_t>(ids[i] * dim + j)] += static_cast<T>(gv[static_cast<size_t>(i * dim + j)]);
    }
  }
  std::vector<double> out(sums.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<double>(static_cast<T>(pv[k]) + sums[k]);
  return out;
}

BOOST_AUTO_TEST_CASE(add_rows_adds_a_tables_touched_rows_in_place_without_a_table_sized_temporary) {
  // A 20,000 x 64 float64 table (10 MB) whose gradient exists: embedding's backward must add
  // the few rows it touched into it, allocating far less than the table.
  constexpr int64_t num = 20000, dim = 64;
  Variable w(wave({num, dim}, 0.7, 0.2), true, "table");
  const Tensor prefill = wave({num, dim}, 0.3, 0.1);
  w.set_grad(prefill.clone());
  const void* grad_storage = w.grad().raw_data();
  const Indices ids({2, 4}, {17, 3, 17, 19999, 5, 17, 0, 3});
  const Tensor g = wave({2, 4, dim}, 0.9, 0.4);
  const Variable y = embedding(w, ids, /*padding_idx=*/5);
  const std::size_t before = memory_stats().live;
  reset_peak_memory_stats();
  y.backward(g);
  const std::size_t table_bytes = static_cast<std::size_t>(num * dim) * sizeof(double);
  BOOST_TEST(memory_stats().peak_live - before < table_bytes / 100);
  BOOST_TEST(w.grad().raw_data() == grad_storage);  // the same gradient, added to in place
  const std::vector<double> expected = expected_table_grad<double>(prefill, ids, g, dim, 5);
  const std::vector<double> got = w.grad().to_vector();
  BOOST_TEST(got == expected, boost::test_tools::per_element());  // bit for bit
}

BOOST_AUTO_TEST_CASE(add_rows_without_a_gradient_and_under_anomaly_mode_gives_the_same_bits) {
  // The three ways a table's gradient arrives (none yet; in place; a separate table added under
  // anomaly mode) give equal bits, f32 included, with repeated ids and a padding row.
  const Indices ids({7}, {2, 9, 2, 4, 2, 9, 1});
  const Tensor g = wave({7, 6}, 0.8, 0.2).to(DType::f32);
  const Tensor prefill = wave({10, 6}, 0.5, 0.3).to(DType::f32);
  const auto table_grad = [&](bool prefilled, bool anomaly) {
    Variable w(wave({10, 6}, 0.4, 0.1).to(DType::f32), true, "table");
    if (prefilled) w.set_grad(prefill.clone());
    std::optional<AnomalyGuard> guard;
    if (anomaly) guard.emplace();
    embedding(w, ids, /*padding_idx=*/4).backward(g);
    return w.grad().clone();
  };
  const Tensor fresh = table_grad(false, false);
  BOOST_TEST(fresh.to_vector() == expected_table_grad<float>(zeros({10, 6}, DType::f32), ids, g, 6, 4),
             boost::test_tools::per_element());
  const Tensor in_place = table_grad(true, false), added = table_grad(true, true);
  BOOST_TEST(in_place.to_vector() == expected_table_grad<float>(prefill, ids, g, 6, 4), boost::test_tools::per_element());
  BOOST_TEST(in_place.to_vector() == added.to_vector(), boost::test_tools::per_element());
  BOOST_TEST(in_place.at({4, 0}) == prefill.at({4, 0}));  // the padding row gets nothing
}

BOOST_AUTO_TEST_CASE(add_rows_checks_its_rows_and_row_numbers) {
  const Variable x = randn_leaf({4, 3}, 1, "x");
  const Variable wrong_width = make_result("wrong_width", x.value().clone(), {x}, [](const Tensor&, GradSink& grads) {
    grads.add_rows(0, ones({1, 2}, DType::f64), {0});
  });
  AG_CHECK_THROWS_WITH(wrong_width.backward(ones({4, 3}, DType::f64)), std::logic_error, "'wrong_width'",
                       "add_rows", "(1, 2)", "(4, 3)");
  const Variable out_of_range = make_result("out_of_range", x.value().clone(), {x}, [](const Tensor&, GradSink& grads) {
    grads.add_rows(0, ones({1, 3}, DType::f64), {4});
  });
  AG_CHECK_THROWS_WITH(out_of_range.backward(ones({4, 3}, DType::f64)), std::logic_error, "'out_of_range'",
                       "row 4", "4 rows");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag
