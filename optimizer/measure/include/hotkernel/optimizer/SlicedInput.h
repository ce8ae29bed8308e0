#pragma once
// The optimizer's GPU inputs (benchmark and measurement inputs of a whole
// variant) built in row slices with a yield point before each, so that
// drawing them is no longer one long unit of GPU work (Note [Bounded units of
// background GPU work] in WorkSlices.h): [8192, 128256] drawn at once was
// ~18 GB of traffic (float32 draw, scale, conversion), ~6 ms on an H200.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

namespace hotkernel {

// A [rows, cols] tensor of `dtype` on `device`; rows [b, b + k) are
// `rowsAt(b, k)` (any dtype, converted into place), enqueued on the current
// stream in slices of kSliceTrafficBytes at kBuildTrafficPerElement.
// `yieldPoint` (may be empty) runs before each slice, the previous one
// finished; when it returns false the build stops and the result is an
// undefined tensor (the caller raises its own "interrupted" error).
at::Tensor buildInRowSlices(int64_t rows, int64_t cols, at::ScalarType dtype, int device,
                            const std::function<at::Tensor(int64_t begin, int64_t rows)>& rowsAt,
                            const std::function<bool()>& yieldPoint);

}  // namespace hotkernel
