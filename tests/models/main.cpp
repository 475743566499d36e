#define BOOST_TEST_MODULE models
#include <boost/test/unit_test.hpp>
