// The thread count, set in one place. attograd's own pool (core/parallel.h) is the only pool
// that runs work in parallel; OpenBLAS is kept single-threaded so that the two never spin on
// the same cores.
#pragma once

namespace ag {

// Sets the number of threads attograd uses (the calling thread included). n >= 1.
void set_num_threads(int n);
int num_threads();

}  // namespace ag
