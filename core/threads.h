// The thread count, set in one place. OpenBLAS's pool is the only pool that runs matrix
// products; keeping its size explicit avoids two pools spinning on the same two cores.
#pragma once

namespace ag {

// Sets the number of threads used by matrix products (OpenBLAS). n >= 1.
void set_num_threads(int n);
int num_threads();

}  // namespace ag
