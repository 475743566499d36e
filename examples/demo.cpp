// A first look at attograd: build a small graph, run backward, and check the gradients against
// central differences in float64.
#include <iostream>

#include "attograd.h"

int main() {
  using namespace ag;
  Generator gen(7);
  // x: (4, 3) inputs, w: (3, 2) weights, b: (2,) bias broadcast over rows.
  Variable x(normal({4, 3}, 0.0, 1.0, gen, DType::f64), true, "x");
  Variable w(normal({3, 2}, 0.0, 1.0, gen, DType::f64), true, "w");
  Variable b(normal({2}, 0.0, 1.0, gen, DType::f64), true, "b");

  const auto model = [](const std::vector<Variable>& in) {
    Variable h = tanh(matmul(in[0], in[1]) + in[2]);  // (4, 2)
    return mean(log_softmax(h, -1) * h);               // scalar
  };

  Variable loss = model({x, w, b});
  loss.backward();
  std::cout << "loss = " << loss.item() << "\n\n" << "d loss / d w:\n" << w.grad() << "\n\n";

  const GradcheckResult check = gradcheck(model, {x, w, b});
  std::cout << "gradcheck over x, w, b: " << (check.ok ? "passed" : "FAILED") << " (" << check.comparisons
            << " comparisons, " << (check.full_jacobian ? "full Jacobian" : "random projections")
            << ", max abs error " << check.max_abs_error << ")\n"
            << check.report;
  return check.ok ? 0 : 1;
}
