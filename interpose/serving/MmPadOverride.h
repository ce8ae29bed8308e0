#pragma once
// The dispatcher trampoline for aten::mm(self, mat2) served by the mm_pad_n
// family (kernels/MmPadFamily.h, Note [Padded GEMMs]): a float16 / bfloat16
// self [M, K] contiguous times mat2 = w.t() of a contiguous weight [N, K]
// whose N is not a multiple of 8 runs as a GEMM padded to N8 (the weight
// padded with zero rows by hk_pad_rows, ATen's own mm on [M, K] x [K, N8],
// hk_pad_rows again into a contiguous [M, N]): eager's shape, strides and
// dtype. One stateless trampoline per key (Note [One stateless trampoline per
// op] in OverrideState.h); any other call, and any doubt (a launch that
// fails, an exception), runs the original kernel: at::cuda::mm on CUDA, the
// captured SafeKernelFunction on other keys. Nothing thrown here reaches the
// caller except the original kernel's own errors.

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>

#include <optional>

#include "OverrideState.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

class MmPadOverride {
 public:
  static constexpr const char* kOpName = "aten::mm";

  // The state of the trampoline (its row in the served-op table).
  static OverrideState& state();
  // Registers the trampoline for `key`. Idempotent per key; throws Error if
  // the op or its kernel for `key` cannot be found.
  static void install(c10::DispatchKey key);
  // The key of a call, as the trampoline keys it (nullopt: one the family never serves).
  static std::optional<VariantKey> keyOf(const at::Tensor& self, const at::Tensor& mat2);
  // The key of a sampled call (aten::mm's inputs self, mat2).
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call);
  // The original kernel for the backend of `ks`, never the padded plan.
  static at::Tensor callOriginal(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& mat2);
};

}  // namespace hotkernel
