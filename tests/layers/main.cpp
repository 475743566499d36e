#define BOOST_TEST_MODULE layers
#include <boost/test/unit_test.hpp>
