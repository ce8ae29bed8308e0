#include "hotkernel/optimizer/SlicedInput.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "hotkernel/optimizer/WorkSlices.h"

namespace hotkernel {

at::Tensor buildInRowSlices(int64_t rows, int64_t cols, at::ScalarType dtype, int device,
                            const std::function<at::Tensor(int64_t, int64_t)>& rowsAt,
                            const std::function<bool()>& yieldPoint) {
  at::Tensor t = at::empty({rows, cols}, at::TensorOptions().dtype(dtype).device(at::kCUDA, device));
  for (const RowSlice& s : rowSlices(rows, cols, kBuildTrafficPerElement)) {
    if (yieldPoint) {
      at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).synchronize();
      if (!yieldPoint()) return at::Tensor();
    }
    t.narrow(0, s.begin, s.rows).copy_(rowsAt(s.begin, s.rows));
  }
  return t;
}

}  // namespace hotkernel
