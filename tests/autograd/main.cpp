#define BOOST_TEST_MODULE autograd
#include <boost/test/unit_test.hpp>
