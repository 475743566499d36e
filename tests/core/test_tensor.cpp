// Tensor semantics: views share storage, copies happen only where documented, factories,
// dtype conversion, element access and printing.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include "attograd/core/kernels.h"
#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

// 0, 1, 2, ... laid out as `shape` (row-major), f64 so that values are exact.
Tensor iota(const Shape& shape, DType dtype = DType::f64) { return arange(shape.numel(), dtype).reshape(shape); }

const std::vector<DType> kDTypes = {DType::f32, DType::f64};

}  // namespace

BOOST_AUTO_TEST_SUITE(tensor_views)

BOOST_AUTO_TEST_CASE(write_through_transpose_is_seen_by_base) {
  Tensor base = iota({2, 3});
  Tensor t = base.t();
  BOOST_TEST(t.shape() == Shape({3, 2}));
  BOOST_TEST(t.shares_storage_with(base));
  BOOST_TEST(!t.is_contiguous());
  BOOST_TEST(t.at({2, 1}) == 5.0);
  t.set({2, 0}, -7.0);
  BOOST_TEST(base.at({0, 2}) == -7.0);
}

BOOST_AUTO_TEST_CASE(write_through_slice_is_seen_by_base) {
  Tensor base = iota({4, 5});
  Tensor s = base.slice(1, 1, 5, 2);  // columns 1 and 3
  BOOST_TEST(s.shape() == Shape({4, 2}));
  BOOST_TEST(s.shares_storage_with(base));
  BOOST_TEST(s.to_vector() == (std::vector<double>{1, 3, 6, 8, 11, 13, 16, 18}));
  s.fill_(-1.0);
  BOOST_TEST(base.to_vector() == (std::vector<double>{0,  -1, 2,  -1, 4,  5,  -1, 7,  -1, 9,
                                                      10, -1, 12, -1, 14, 15, -1, 17, -1, 19}));
}

BOOST_AUTO_TEST_CASE(write_through_reshape_and_view_is_seen_by_base) {
  Tensor base = iota({2, 6});
  Tensor r = base.reshape({3, 4});
  Tensor v = base.view({4, -1});
  BOOST_TEST(r.shares_storage_with(base));
  BOOST_TEST(v.shares_storage_with(base));
  BOOST_TEST(v.shape() == Shape({4, 3}));
  r.set({2, 1}, 100.0);  // flat index 9
  BOOST_TEST(base.at({1, 3}) == 100.0);
  BOOST_TEST(v.at({3, 0}) == 100.0);
}

BOOST_AUTO_TEST_CASE(write_through_permute_narrow_select_unsqueeze_squeeze) {
  Tensor base = iota({2, 3, 4});
  Tensor p = base.permute({2, 0, 1});
  BOOST_TEST(p.shape() == Shape({4, 2, 3}));
  BOOST_TEST(p.at({3, 1, 2}) == base.at({1, 2, 3}));
  p.set({1, 0, 2}, -1.0);
  BOOST_TEST(base.at({0, 2, 1}) == -1.0);

  Tensor n = base.narrow(1, 1, 2);
  BOOST_TEST(n.shape() == Shape({2, 2, 4}));
  n.set({1, 1, 3}, -2.0);
  BOOST_TEST(base.at({1, 2, 3}) == -2.0);

  Tensor s = base.select(0, -1);
  BOOST_TEST(s.shape() == Shape({3, 4}));
  s.set({0, 0}, -3.0);
  BOOST_TEST(base.at({1, 0, 0}) == -3.0);

  Tensor u = base.unsqueeze(1).unsqueeze(-1);
  BOOST_TEST(u.shape() == Shape({2, 1, 3, 4, 1}));
  u.set({0, 0, 1, 1, 0}, -4.0);
  BOOST_TEST(base.at({0, 1, 1}) == -4.0);
  Tensor q = u.squeeze(1);
  BOOST_TEST(q.shape() == Shape({2, 3, 4, 1}));
  BOOST_TEST(u.squeeze().shape() == Shape({2, 3, 4}));
  BOOST_TEST(q.shares_storage_with(base));
}

BOOST_AUTO_TEST_CASE(views_of_views_compose) {
  Tensor base = iota({3, 4, 5});
  // Column 2 of the transposed middle slab, read through three views.
  Tensor v = base.transpose(0, 2).narrow(1, 1, 2).slice(0, 0, 5, 2);
  BOOST_TEST(v.shape() == Shape({3, 2, 3}));
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t k = 0; k < 3; ++k) BOOST_TEST(v.at({i, j, k}) == base.at({k, j + 1, 2 * i}));
    }
  }
}

BOOST_AUTO_TEST_CASE(contiguous_copies_only_when_needed) {
  Tensor base = iota({3, 4});
  Tensor same = base.contiguous();
  BOOST_TEST(same.shares_storage_with(base));
  Tensor t = base.t();
  Tensor c = t.contiguous();
  BOOST_TEST(!c.shares_storage_with(base));
  BOOST_TEST(c.is_contiguous());
  BOOST_TEST(c.strides() == (std::vector<int64_t>{3, 1}));
  BOOST_TEST(c.to_vector() == t.to_vector());
  // A narrow along the outer axis of a contiguous tensor is still contiguous: no copy.
  Tensor rows = base.narrow(0, 1, 2);
  BOOST_TEST(rows.is_contiguous());
  BOOST_TEST(rows.contiguous().shares_storage_with(base));
}

BOOST_AUTO_TEST_CASE(reshape_copies_non_contiguous_data) {
  Tensor base = iota({2, 3});
  Tensor r = base.t().reshape({6});
  BOOST_TEST(!r.shares_storage_with(base));
  BOOST_TEST(r.to_vector() == (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

BOOST_AUTO_TEST_CASE(clone_always_copies) {
  Tensor base = iota({2, 3});
  Tensor c = base.clone();
  BOOST_TEST(!c.shares_storage_with(base));
  BOOST_TEST(c.to_vector() == base.to_vector());
  c.set({0, 0}, 42.0);
  BOOST_TEST(base.at({0, 0}) == 0.0);
}

BOOST_AUTO_TEST_CASE(expand_uses_stride_zero) {
  Tensor base = from_vector(std::vector<double>{1, 2, 3}, {3, 1}, DType::f64);
  Tensor e = base.expand({2, 3, 4});
  BOOST_TEST(e.shape() == Shape({2, 3, 4}));
  BOOST_TEST(e.strides() == (std::vector<int64_t>{0, 1, 0}));
  BOOST_TEST(e.shares_storage_with(base));
  BOOST_TEST(e.at({1, 2, 3}) == 3.0);
  base.set({1, 0}, 20.0);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t k = 0; k < 4; ++k) BOOST_TEST(e.at({i, 1, k}) == 20.0);
  }
  BOOST_TEST(e.contiguous().strides() == (std::vector<int64_t>{12, 4, 1}));
}

BOOST_AUTO_TEST_CASE(slice_handles_negative_bounds_clamping_and_steps) {
  Tensor x = arange(10, DType::f64);
  BOOST_TEST(x.slice(0, -3, 10).to_vector() == (std::vector<double>{7, 8, 9}));
  BOOST_TEST(x.slice(0, 2, -5).to_vector() == (std::vector<double>{2, 3, 4}));
  BOOST_TEST(x.slice(0, 1, 100, 3).to_vector() == (std::vector<double>{1, 4, 7}));
  BOOST_TEST(x.slice(0, 8, 3).numel() == 0);
  BOOST_TEST(x.slice(0, 0, 10, 4).strides() == (std::vector<int64_t>{4}));
}

BOOST_AUTO_TEST_CASE(copy_broadcasts_and_converts) {
  Tensor dst = zeros({2, 3}, DType::f64);
  dst.copy_(from_vector(std::vector<float>{1.5f, 2.5f, 3.5f}, {3}, DType::f32));
  BOOST_TEST(dst.to_vector() == (std::vector<double>{1.5, 2.5, 3.5, 1.5, 2.5, 3.5}));
  // Into a transposed view: the base sees the values in transposed order.
  Tensor base = zeros({3, 2}, DType::f64);
  base.t().copy_(iota({2, 3}));
  BOOST_TEST(base.to_vector() == (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

BOOST_AUTO_TEST_CASE(fill_of_a_view_touches_only_its_elements) {
  Tensor base = zeros({3, 3}, DType::f64);
  base.slice(0, 0, 3, 2).slice(1, 1, 2).fill_(5.0);
  BOOST_TEST(base.to_vector() == (std::vector<double>{0, 5, 0, 0, 0, 0, 0, 5, 0}));
}

BOOST_AUTO_TEST_SUITE_END()

// In-place ops whose source shares memory with their destination: the result is the one a
// separate copy of the source would give (x.copy_(x.t()) once wrote [0 3 6 3 4 7 6 7 8]).
BOOST_AUTO_TEST_SUITE(in_place_overlap)

BOOST_AUTO_TEST_CASE(overlap_is_classified_by_memory_and_layout) {
  const Tensor x = iota({3, 4});
  BOOST_TEST((memory_overlap(x, iota({3, 4})) == MemoryOverlap::none));
  BOOST_TEST((memory_overlap(x, x.view({3, 4})) == MemoryOverlap::same));
  BOOST_TEST((memory_overlap(x.select(0, 0), x.select(0, 2)) == MemoryOverlap::none));
  BOOST_TEST((memory_overlap(x.narrow(1, 0, 3), x.narrow(1, 1, 3)) == MemoryOverlap::partial));
  BOOST_TEST((memory_overlap(x.view({4, 3}), x.view({4, 3}).t().contiguous()) == MemoryOverlap::none));
  BOOST_TEST((memory_overlap(x.view({2, 6}), x.view({3, 4})) == MemoryOverlap::partial));
  BOOST_TEST((memory_overlap(x.narrow(0, 0, 0), x) == MemoryOverlap::none));
}

BOOST_AUTO_TEST_CASE(copy_from_an_overlapping_view_reads_the_source_first) {
  Tensor x = iota({3, 3});
  x.copy_(x.t());
  BOOST_TEST(x.to_vector() == (std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
  Tensor v = iota({6});
  v.slice(0, 1, 6).copy_(v.slice(0, 0, 5));  // shifted right by one
  BOOST_TEST(v.to_vector() == (std::vector<double>{0, 0, 1, 2, 3, 4}));
  Tensor w = iota({6});
  w.slice(0, 0, 5).copy_(w.slice(0, 1, 6));  // shifted left by one
  BOOST_TEST(w.to_vector() == (std::vector<double>{1, 2, 3, 4, 5, 5}));
  // The same tensor in the same layout needs no copy and is left as it was.
  Tensor y = iota({2, 3});
  y.copy_(y);
  BOOST_TEST(y.to_vector() == (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

BOOST_AUTO_TEST_CASE(add_in_place_from_an_overlapping_view_reads_the_source_first) {
  Tensor x = iota({3, 3});
  kernels::add_(x, x.t());  // x + x^T: symmetric
  BOOST_TEST(x.to_vector() == (std::vector<double>{0, 4, 8, 4, 8, 12, 8, 12, 16}));
  Tensor v = iota({5});
  Tensor tail = v.slice(0, 1, 5);
  kernels::add_(tail, v.slice(0, 0, 4), 10.0);
  BOOST_TEST(v.to_vector() == (std::vector<double>{0, 1, 12, 23, 34}));
  Tensor y = iota({2, 3});
  kernels::add_(y, y, 2.0);  // the same elements in the same layout: elementwise in place
  BOOST_TEST(y.to_vector() == (std::vector<double>{0, 3, 6, 9, 12, 15}));
}

BOOST_AUTO_TEST_CASE(matmul_add_from_an_operand_that_is_out_reads_it_first) {
  Generator gen(5);
  const Tensor start = normal({8, 8}, 0.0, 1.0, gen, DType::f64);
  const Tensor b = normal({8, 8}, 0.0, 1.0, gen, DType::f64);
  const Tensor expected = kernels::add(start, kernels::matmul(start, b));
  Tensor out = start.clone();
  kernels::matmul_add_(out, out, b);  // out += out b
  BOOST_TEST(max_abs_diff(out, expected) < 1e-12);
  Tensor out2 = start.clone();
  kernels::matmul_add_(out2, b, out2.t());  // out += b out^T
  BOOST_TEST(max_abs_diff(out2, kernels::add(start, kernels::matmul(b, start.t()))) < 1e-12);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tensor_factories)

BOOST_DATA_TEST_CASE(zeros_ones_full_scalar, bdata::make(kDTypes), dtype) {
  const Tensor z = zeros({2, 3}, dtype);
  BOOST_TEST(z.dtype() == dtype);
  BOOST_TEST(z.shape() == Shape({2, 3}));
  BOOST_TEST(z.to_vector() == std::vector<double>(6, 0.0));
  BOOST_TEST(ones({4}, dtype).to_vector() == std::vector<double>(4, 1.0));
  BOOST_TEST(full({2, 2}, -2.5, dtype).to_vector() == std::vector<double>(4, -2.5));
  const Tensor s = scalar(3.25, dtype);
  BOOST_TEST(s.dim() == 0);
  BOOST_TEST(s.item() == 3.25);
  BOOST_TEST(zeros({0, 4}, dtype).numel() == 0);
}

BOOST_DATA_TEST_CASE(arange_counts_like_python, bdata::make(kDTypes), dtype) {
  BOOST_TEST(arange(5, dtype).to_vector() == (std::vector<double>{0, 1, 2, 3, 4}));
  BOOST_TEST(arange(1.0, 2.0, 0.25, dtype).to_vector() == (std::vector<double>{1, 1.25, 1.5, 1.75}));
  BOOST_TEST(arange(3.0, 0.0, -1.0, dtype).to_vector() == (std::vector<double>{3, 2, 1}));
  BOOST_TEST(arange(2.0, 2.0, 1.0, dtype).numel() == 0);
  BOOST_TEST(arange(0.0, 1.0, 0.3, dtype).numel() == 4);  // 0, 0.3, 0.6, 0.9
  BOOST_TEST(arange(5, dtype).dtype() == dtype);
}

BOOST_DATA_TEST_CASE(from_vector_fills_row_major, bdata::make(kDTypes), dtype) {
  const Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, dtype);
  BOOST_TEST(a.dtype() == dtype);
  BOOST_TEST(a.at({1, 0}) == 4.0);
  BOOST_TEST(a.at({0, 2}) == 3.0);
  const Tensor b = from_vector(std::vector<float>{0.5f, -1.0f}, {2, 1}, dtype);
  BOOST_TEST(b.at({1, 0}) == -1.0);
}

BOOST_AUTO_TEST_CASE(to_dtype_converts_and_is_a_no_op_when_equal) {
  const Tensor d = from_vector(std::vector<double>{0.1, 1.0 / 3.0, 1e10}, {3}, DType::f64);
  const Tensor f = d.to(DType::f32);
  BOOST_TEST(f.dtype() == DType::f32);
  BOOST_TEST(!f.shares_storage_with(d));
  BOOST_TEST(f.at({0}) == static_cast<double>(0.1f));
  BOOST_TEST(f.at({1}) == static_cast<double>(static_cast<float>(1.0 / 3.0)));
  BOOST_TEST(f.at({1}) != d.at({1}));  // rounding really happened
  BOOST_TEST(d.to(DType::f64).shares_storage_with(d));
  // A non-contiguous f64 -> f32 conversion keeps the logical order.
  const Tensor t = iota({2, 3}).t().to(DType::f32);
  BOOST_TEST(t.to_vector() == (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

BOOST_AUTO_TEST_CASE(item_at_and_set) {
  Tensor x = iota({2, 3});
  BOOST_TEST(x.at({1, 2}) == 5.0);
  x.set({0, 1}, 9.5);
  BOOST_TEST(x.to_vector() == (std::vector<double>{0, 9.5, 2, 3, 4, 5}));
  BOOST_TEST(x.narrow(1, 2, 1).narrow(0, 1, 1).item() == 5.0);
  Tensor f = zeros({2}, DType::f32);
  f.set({1}, 0.1);
  BOOST_TEST(f.at({1}) == static_cast<double>(0.1f));
  BOOST_TEST(*f.data<float>() == 0.0f);
}

BOOST_AUTO_TEST_CASE(data_checks_the_dtype) {
  Tensor x = zeros({2}, DType::f32);
  AG_CHECK_THROWS_WITH(x.data<double>(), std::invalid_argument, "data", "f32", "f64");
  AG_CHECK_THROWS_WITH(Tensor().data<float>(), std::logic_error, "data", "undefined");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tensor_printing)

BOOST_AUTO_TEST_CASE(prints_shape_dtype_and_values) {
  const std::string s = arange(6, DType::f32).reshape({2, 3}).str();
  BOOST_TEST(s == "Tensor(shape=(2, 3), dtype=f32)\n[[0, 1, 2],\n [3, 4, 5]]", s);
  std::ostringstream os;
  os << scalar(2.5, DType::f64);
  BOOST_TEST(os.str() == "Tensor(shape=(), dtype=f64)\n2.5");
  BOOST_TEST(Tensor().str() == "Tensor(undefined)");
}

BOOST_AUTO_TEST_CASE(prints_a_transposed_view_in_logical_order) {
  const std::string s = arange(6, DType::f64).reshape({2, 3}).t().str();
  BOOST_TEST(s == "Tensor(shape=(3, 2), dtype=f64)\n[[0, 3],\n [1, 4],\n [2, 5]]", s);
}

BOOST_AUTO_TEST_CASE(elides_large_tensors) {
  const std::string s = arange(100, DType::f64).str();
  BOOST_TEST(s == "Tensor(shape=(100,), dtype=f64)\n[0, 1, 2, ..., 97, 98, 99]", s);
  const std::string m = arange(400, DType::f32).reshape({20, 20}).str();
  BOOST_TEST(m.find("Tensor(shape=(20, 20), dtype=f32)") == 0u, m);
  BOOST_TEST(m.find("[380, 381, 382, ..., 397, 398, 399]]") != std::string::npos, m);
  BOOST_TEST(m.find(" ...,\n") != std::string::npos, m);  // elided rows
  BOOST_TEST(m.find("200") == std::string::npos, m);      // a middle value is not printed
  // The elision threshold is a parameter: with 200 entries allowed per dimension nothing is elided.
  BOOST_TEST(arange(100, DType::f64).str(200).find("...") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()


// Sizes that do not fit 64 bits were once multiplied without a check: zeros({2^32, 2^32})
// had numel() == 0 and zeros({2^62}) was backed by 64 bytes. Each is now refused by name.
BOOST_AUTO_TEST_SUITE(sizes_that_overflow)

BOOST_AUTO_TEST_CASE(element_counts_that_overflow_are_refused) {
  const int64_t big = int64_t{1} << 32;
  AG_CHECK_THROWS_WITH((Shape{big, big}.numel()), std::invalid_argument, "Shape::numel", "(4294967296, 4294967296)",
                       "64 bits");
  AG_CHECK_THROWS_WITH(zeros({big, big}), std::invalid_argument, "zeros", "(4294967296, 4294967296)");
  AG_CHECK_THROWS_WITH(empty({big, big, 2}), std::invalid_argument, "empty");
  AG_CHECK_THROWS_WITH(full({big, big}, 1.0), std::invalid_argument, "full");
  AG_CHECK_THROWS_WITH(normal({big, big}, 0, 1, default_generator()), std::invalid_argument, "normal");
  AG_CHECK_THROWS_WITH(uniform({big, big}, 0, 1, default_generator()), std::invalid_argument, "uniform");
  AG_CHECK_THROWS_WITH(from_vector(std::vector<double>{}, Shape{big, big}), std::invalid_argument, "from_vector");
  AG_CHECK_THROWS_WITH(arange(0, 1e30, 1), std::invalid_argument, "arange", "64 bits");
  // A zero anywhere makes any product 0.
  BOOST_TEST((Shape{0, big, big}.numel()) == 0);
  // A view of an empty tensor cannot smuggle an overflowing shape in either.
  AG_CHECK_THROWS_WITH(zeros({0}).view({big, big}), std::invalid_argument, "view", "64 bits");
}

BOOST_AUTO_TEST_CASE(byte_sizes_that_overflow_are_refused) {
  const int64_t n = int64_t{1} << 62;  // fits int64 as a count, not as f32 bytes
  AG_CHECK_THROWS_WITH(zeros({n}), std::invalid_argument, "zeros", "(4611686018427387904,)", "bytes");
  AG_CHECK_THROWS_WITH(Tensor(Shape{n}, DType::f64), std::invalid_argument, "Tensor", "bytes");
}

BOOST_AUTO_TEST_CASE(memory_the_system_refuses_is_a_message_with_the_shape_and_bytes) {
  // 2^44 floats: 64 TiB, more than any machine here can map.
  const int64_t n = int64_t{1} << 44;
  std::string message;
  try {
    zeros({n});
  } catch (const OutOfMemory& e) {
    message = e.what();
  }
  BOOST_TEST(message.find("zeros") != std::string::npos, message);
  BOOST_TEST(message.find("(17592186044416,)") != std::string::npos, message);
  BOOST_TEST(message.find("64.0 TiB") != std::string::npos, message);
  BOOST_TEST(format_bytes(512) == "512 bytes");
  BOOST_TEST(format_bytes(1536) == "1.5 KiB");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
