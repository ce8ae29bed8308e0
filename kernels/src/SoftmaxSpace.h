#pragma once
// The softmax family's whitelist of parameter points, which its guards, its
// compile options and its parameter space share (internal to kernels/src;
// defined in SoftmaxSpace.cpp).

#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel::kernels::detail {

// Whether `p` is one of SoftmaxFamily::allParameterPoints(dtype).
bool isSoftmaxPoint(DType dtype, const SoftmaxParams& p);

}  // namespace hotkernel::kernels::detail
