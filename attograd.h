// attograd: everything a user needs, in one include.
#pragma once
#include "core/kernels.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/variable.h"
#include "autograd/nn_ops.h"
