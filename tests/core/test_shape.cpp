// Shape: printing, element counts, negative axes, broadcasting rules and their failures.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include "support.h"

namespace bdata = boost::unit_test::data;

namespace ag::testing {
namespace {

struct BroadcastCase {
  Shape a, b, expected;
};
std::ostream& operator<<(std::ostream& os, const BroadcastCase& c) {
  return os << c.a << " with " << c.b << " -> " << c.expected;
}

const std::vector<BroadcastCase> kBroadcastCases = {
    {{2, 3}, {2, 3}, {2, 3}},
    {{2, 3}, {3}, {2, 3}},
    {{2, 3}, {1, 3}, {2, 3}},
    {{2, 1}, {1, 3}, {2, 3}},
    {{4, 1, 3}, {2, 1}, {4, 2, 3}},
    {{}, {2, 3}, {2, 3}},
    {{5, 1, 1}, {1}, {5, 1, 1}},
    {{1}, {7}, {7}},
    {{0, 3}, {1, 3}, {0, 3}},
    {{2, 3, 4, 1}, {3, 1, 5}, {2, 3, 4, 5}},
};

struct BadBroadcastCase {
  Shape a, b;
};
std::ostream& operator<<(std::ostream& os, const BadBroadcastCase& c) { return os << c.a << " with " << c.b; }

const std::vector<BadBroadcastCase> kBadBroadcastCases = {
    {{2, 3}, {4}}, {{2, 3}, {3, 2}}, {{4, 2, 3}, {3, 3}}, {{2}, {3}}, {{0}, {2}},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(shape)

BOOST_AUTO_TEST_CASE(prints_like_a_tuple) {
  BOOST_TEST(Shape({2, 3}).str() == "(2, 3)");
  BOOST_TEST(Shape({}).str() == "()");
  BOOST_TEST(Shape({5}).str() == "(5,)");
  BOOST_TEST(Shape({1, 2, 3, 4}).str() == "(1, 2, 3, 4)");
  std::ostringstream os;
  os << Shape{7, 0};
  BOOST_TEST(os.str() == "(7, 0)");
}

BOOST_AUTO_TEST_CASE(numel_rank_and_negative_axes) {
  const Shape s{2, 3, 4};
  BOOST_TEST(s.numel() == 24);
  BOOST_TEST(s.rank() == 3);
  BOOST_TEST(s[-1] == 4);
  BOOST_TEST(s[-3] == 2);
  BOOST_TEST(Shape{}.numel() == 1);  // a scalar holds one element
  BOOST_TEST(Shape({3, 0, 2}).numel() == 0);
  BOOST_TEST(Shape({2, 3}) != Shape({3, 2}));
}

BOOST_AUTO_TEST_CASE(contiguous_strides_are_row_major) {
  BOOST_TEST(contiguous_strides({2, 3, 4}) == (std::vector<int64_t>{12, 4, 1}));
  BOOST_TEST(contiguous_strides({5}) == (std::vector<int64_t>{1}));
  BOOST_TEST(contiguous_strides({}).empty());
}

BOOST_DATA_TEST_CASE(broadcast_shapes_follows_numpy_rules, bdata::make(kBroadcastCases), c) {
  BOOST_TEST(broadcast_shapes(c.a, c.b) == c.expected, broadcast_shapes(c.a, c.b));
  // Broadcasting is symmetric.
  BOOST_TEST(broadcast_shapes(c.b, c.a) == c.expected, broadcast_shapes(c.b, c.a));
  BOOST_TEST(broadcastable_to(c.a, c.expected));
  BOOST_TEST(broadcastable_to(c.b, c.expected));
}

BOOST_DATA_TEST_CASE(broadcast_shapes_rejects_mismatches, bdata::make(kBadBroadcastCases), c) {
  AG_CHECK_THROWS_WITH(broadcast_shapes(c.a, c.b, "my_op"), std::invalid_argument, "my_op", c.a.str(), c.b.str());
}

BOOST_AUTO_TEST_CASE(broadcastable_to_is_one_way) {
  BOOST_TEST(broadcastable_to({3, 1}, {2, 3, 4}));
  BOOST_TEST(!broadcastable_to({2, 3, 4}, {3, 1}));
  BOOST_TEST(!broadcastable_to({3}, {3, 4}));
  BOOST_TEST(broadcastable_to({}, {3, 4}));
}

BOOST_AUTO_TEST_CASE(normalize_axis_wraps_negative_axes) {
  BOOST_TEST(normalize_axis(-1, 3, "op") == 2);
  BOOST_TEST(normalize_axis(-3, 3, "op") == 0);
  BOOST_TEST(normalize_axis(1, 3, "op") == 1);
  AG_CHECK_THROWS_WITH(normalize_axis(3, 3, "my_op"), std::invalid_argument, "my_op", "axis 3");
  AG_CHECK_THROWS_WITH(normalize_axis(-4, 3, "my_op"), std::invalid_argument, "my_op", "axis -4");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
