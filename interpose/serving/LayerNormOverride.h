#pragma once
// The dispatcher trampoline for aten::native_layer_norm(input,
// normalized_shape, weight?, bias?, eps) -> (out, mean, rstd): the leaf op of
// layer_norm on CUDA. As RmsNormOverride.h: a plan hit returns mean and rstd
// as float32 of shape leading dims + [1] * len(normalized_shape), what ATen's
// CUDA kernel returns (Note [What ATen's native_layer_norm returns],
// kernels/src/LayerNormFamily.cpp); anything else runs the original kernel
// (at::cuda::native_layer_norm on CUDA, the captured SafeKernelFunction on
// other keys).

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>

#include <optional>
#include <tuple>

#include "OverrideState.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

class LayerNormOverride {
 public:
  static constexpr const char* kOpName = "aten::native_layer_norm";

  // The state of the trampoline (its row in the served-op table).
  static OverrideState& state();
  // The key of a sampled call, as the trampoline keys it (nullopt: one it never serves).
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call);

  static void install(c10::DispatchKey key);


  static std::tuple<at::Tensor, at::Tensor, at::Tensor> callOriginal(c10::DispatchKeySet ks, const at::Tensor& input,
                                                                     c10::SymIntArrayRef normalizedShape,
                                                                     const std::optional<at::Tensor>& weight,
                                                                     const std::optional<at::Tensor>& bias, double eps);

};

}  // namespace hotkernel
