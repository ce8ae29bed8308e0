#pragma once
// One call of a GEMM padded to an aligned N (Note [Padded GEMMs] in
// kernels/src/MmPadFamily.cpp): the op overrides serving aten::mm and
// aten::addmm and the optimizer's tuner and check run the same steps through
// this function.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// The original kernel: self [M, K] x mat2 [K, N8] (+ bias [N8] when defined)
// -> a contiguous [M, N8]: mm, or addmm with the call's beta and alpha.
using MmKernel = std::function<at::Tensor(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& bias)>;

// self [M, K] (row-major) times mat2 [K, N] (the transpose of a contiguous
// weight [N, K]), plus `bias` [N] (contiguous) when defined, as: the weight
// padded with zero rows to [n8, K] and the bias with zeros to [n8] (`pad`, a
// plan's hk_pad_rows launcher, on `stream`), `mm` of self, that [K, n8] and
// that bias, its first N columns copied into a contiguous [M, N] (`pad` again). Returns
// that [M, N], or an undefined tensor when a launch failed, a buffer is not
// aligned to pad.alignment() or mm's result is not a contiguous [M, n8]: the
// caller then runs the original. `w8` / `out`: the buffers to write ([n8, K],
// [M, N], self's dtype and device) when defined (the tuner's checks pass
// buffers filled with NaN to catch an element left unwritten), else allocated.
// Precondition: the caller checked the layouts (MmPadOverride::keyOf); n8 >= N.
at::Tensor runPaddedMm(const KernelLauncher& pad, const at::Tensor& self, const at::Tensor& mat2,
                       const at::Tensor& bias, int64_t n8, const MmKernel& mm, void* stream, at::Tensor w8 = {},
                       at::Tensor out = {});

}  // namespace hotkernel
