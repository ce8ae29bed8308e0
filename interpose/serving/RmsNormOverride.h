#pragma once
// The dispatcher trampoline for aten::_fused_rms_norm(input, normalized_shape,
// weight?, eps?) -> (out, rstd): the leaf op that the composite rms_norm
// (F.rms_norm) calls on CUDA. One stateless trampoline per key (Note [One
// stateless trampoline per op] in SoftmaxOverride.h); a plan hit returns out
// in the input's dtype and rstd as float32 of shape leading dims + [1] *
// len(normalized_shape), what ATen's CUDA kernel returns (Note [What ATen's
// _fused_rms_norm returns], kernels/src/RmsNormFamily.cpp), so autograd's
// saved rstd is the same tensor ATen would have given. Anything else (and any
// doubt: misaligned data, a failed launch, an exception) runs the original
// kernel: at::cuda::_fused_rms_norm on CUDA, the captured SafeKernelFunction
// on other keys. Nothing thrown here reaches the caller except the original
// kernel's own errors.

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>

#include <optional>
#include <tuple>

#include "OverrideState.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

class RmsNormOverride {
 public:
  static constexpr const char* kOpName = "aten::_fused_rms_norm";

  // Registers the trampoline for `key`. Idempotent per key; throws Error if
  // the op or its kernel for `key` cannot be found.
  // The state of the trampoline (its row in the served-op table).
  static OverrideState& state();
  // The key of a sampled call, as the trampoline keys it (nullopt: one it never serves).
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call);

  static void install(c10::DispatchKey key);


  // The original kernel for the backend of `ks`, never a hotkernel kernel.
  static std::tuple<at::Tensor, at::Tensor> callOriginal(c10::DispatchKeySet ks, const at::Tensor& input,
                                                         at::IntArrayRef normalizedShape,
                                                         const std::optional<at::Tensor>& weight,
                                                         std::optional<double> eps);

};

}  // namespace hotkernel
