#pragma once
// The dispatcher trampoline for aten::native_group_norm(input, weight?, bias?,
// N, C, HxW, group, eps) -> (out, mean, rstd): the leaf op of F.group_norm on
// CUDA. A plan hit returns out like the input and mean, rstd as [N, group] of
// the input's dtype, what ATen's CUDA kernel returns (Note [What ATen's
// native_group_norm returns], kernels/src/GroupNormFamily.cpp); anything else
// runs the original kernel (at::cuda::native_group_norm on CUDA, the captured
// SafeKernelFunction on other keys).

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>

#include <optional>
#include <tuple>

#include "OverrideState.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// The key of a group_norm call hotkernel can serve, or nullopt: input empty,
// not contiguous or of another dtype than float32 / float16 / bfloat16, N * C *
// HxW not its element count, C not a multiple of group, HxW < 2; a weight or
// bias (when defined) not contiguous, not of C elements in one dim, or of
// another dtype or device than the input (ATen's mixed-type path). Device is
// -1 for CPU tensors.
std::optional<VariantKey> groupNormKeyOfCall(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                             const std::optional<at::Tensor>& bias, int64_t n, int64_t c, int64_t hw,
                                             int64_t group);

class GroupNormOverride {
 public:
  static constexpr const char* kOpName = "aten::native_group_norm";

  static OverrideState& state();
  // The key of a sampled call, as the trampoline keys it (nullopt: one it never serves).
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call);
  static void install(c10::DispatchKey key);
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> callOriginal(c10::DispatchKeySet ks, const at::Tensor& input,
                                                                     const std::optional<at::Tensor>& weight,
                                                                     const std::optional<at::Tensor>& bias,
                                                                     c10::SymInt n, c10::SymInt c, c10::SymInt hw,
                                                                     int64_t group, double eps);
};

}  // namespace hotkernel
