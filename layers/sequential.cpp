#include "attograd/layers/sequential.h"

namespace ag {

Variable Sequential::forward(const Variable& x) {
  Variable y = x;
  for (const auto& step : steps_) y = step(y);
  return y;
}

}  // namespace ag
