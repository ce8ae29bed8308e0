#pragma once
// The dispatcher trampoline for aten::native_batch_norm(input, weight?,
// bias?, running_mean?, running_var?, training, momentum, eps) -> (out,
// save_mean, save_invstd): the leaf op of F.batch_norm on CUDA where cuDNN
// is not taken. It serves the one call shape that is a row normalization
// (Note [Batch norm of one sample] in hotkernel/kernels/BatchNormFamily.h):
// a plan hit returns out like the input and save_mean, save_invstd as float32
// [C], what ATen's CUDA kernel returns; anything else runs the original
// kernel (at::cuda::native_batch_norm on CUDA, the captured
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

// The key of a batch_norm call hotkernel can serve (rows = C, cols = the
// elements of a channel, no options), or nullopt: not training; a weight,
// bias, running mean or running variance given; input of fewer than two
// dims, not one sample (size(0) != 1), empty, not contiguous or of another
// dtype than float32 / float16 / bfloat16; a [C, K] layer_norm variant the
// kernel cannot take. Device is -1 for CPU tensors.
std::optional<VariantKey> batchNormKeyOfCall(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                             const std::optional<at::Tensor>& bias,
                                             const std::optional<at::Tensor>& runningMean,
                                             const std::optional<at::Tensor>& runningVar, bool training);

class BatchNormOverride {
 public:
  static constexpr const char* kOpName = "aten::native_batch_norm";

  static OverrideState& state();
  // The key of a sampled call, as the trampoline keys it (nullopt: one it never serves).
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call);
  static void install(c10::DispatchKey key);
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> callOriginal(
      c10::DispatchKeySet ks, const at::Tensor& input, const std::optional<at::Tensor>& weight,
      const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& runningMean,
      const std::optional<at::Tensor>& runningVar, bool training, double momentum, double eps);
};

}  // namespace hotkernel
