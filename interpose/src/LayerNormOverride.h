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
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>

#include <optional>
#include <tuple>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

class LayerNormOverride {
 public:
  static constexpr const char* kOpName = "aten::native_layer_norm";

  static void install(c10::DispatchKey key);
  static bool installed(c10::DispatchKey key);

  static PlanSlot& plans();
  using DeviceHook = bool (*)(int device);
  static void setDeviceHook(DeviceHook hook);
  static bool setEnabled(bool enabled);
  static bool enabled();

  static std::tuple<at::Tensor, at::Tensor, at::Tensor> callOriginal(c10::DispatchKeySet ks, const at::Tensor& input,
                                                                     c10::SymIntArrayRef normalizedShape,
                                                                     const std::optional<at::Tensor>& weight,
                                                                     const std::optional<at::Tensor>& bias, double eps);

  static uint64_t hits();
  static uint64_t misses();
};

}  // namespace hotkernel
