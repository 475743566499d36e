#include "attograd/core/threads.h"

#include <cblas.h>

#include <stdexcept>
#include <string>

#include "attograd/core/parallel.h"

namespace ag {

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_num_threads: need at least 1 thread, got " + std::to_string(n));
  openblas_set_num_threads(1);
  detail::resize_pool(n);
}

int num_threads() { return detail::pool_threads(); }

}  // namespace ag
