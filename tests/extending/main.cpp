#define BOOST_TEST_MODULE extending
#include <boost/test/unit_test.hpp>
