// Initialisers that write a parameter's new values in place (its handles stay valid), for models
// that set their own initialisation after the layers built theirs (GPT-2's N(0, 0.02), Llama's).
// Each draws one stream of default_generator(), so the values are those normal(shape, 0, std)
// would give from the same state, without a second copy of the largest table; under a
// SkipInitGuard (core/skip_init.h) they draw nothing and leave the zeros the layers made.
#pragma once

#include "attograd/autograd/variable.h"
#include "attograd/layers/linear.h"

namespace ag {

// p = N(0, std), element by element.
void init_normal(const Variable& p, double std);
// weight = N(0, std), bias (when there is one) = 0.
void init_linear(Linear& linear, double std);

}  // namespace ag
