#pragma once
// The variant key of an aten::_fused_rms_norm or aten::native_layer_norm call
// (RmsNormOverride, LayerNormOverride and the recorder).

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>

#include <optional>
#include <vector>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// A norm call hotkernel can serve: its plan-table key and the shape ATen
// gives the statistics (leading dims + [1] * len(normalized_shape)).
struct NormCall {
  VariantKey key;
  std::vector<int64_t> statShape;
};

// The key of a norm call, or nullopt when hotkernel never serves it: input
// empty, not contiguous, of another dtype than float32/float16/bfloat16, or
// whose trailing dims are not `normalizedShape`; a weight or bias (when
// defined) not contiguous, of another dtype or device than the input, or not
// of shape `normalizedShape`. ATen then runs and raises whatever it raises.
// `bias` is nullopt for rms_norm. Device is -1 for CPU tensors.
std::optional<NormCall> normCallOf(const at::Tensor& input, at::IntArrayRef normalizedShape,
                                   const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias);

// The key of a sampled norm call (input, normalized_shape, weight?, [bias?,]
// eps): normCallOf's, or nullopt for arguments the trampoline never serves.
// `hasBiasArgument`: native_layer_norm's schema (rms_norm has no bias).
std::optional<VariantKey> recordedNormKey(const at::RecordFunction& call, bool hasBiasArgument);

// A norm launch's last two arguments: a grid-split plan's partials and counter
// (Plan::workspaceFloats > 0), from the stream's persistent workspace (Note [A
// persistent workspace per stream]), the counter its last float; null for
// any other plan. `buffer` keeps the workspace alive for the launch.
struct NormWorkspace {
  at::Tensor buffer;
  float* partials = nullptr;
  void* counter = nullptr;
};
// Precondition: `stream` is the current CUDA stream of `input`'s device (null
// for a CPU tensor). May throw (allocation): the trampolines catch it.
NormWorkspace normWorkspaceFor(const Plan& plan, const at::Tensor& input, void* stream);

// Launches a plan of hk_layer_norm's argument list (layer_norm, group_norm,
// batch_norm) on `input`'s current stream (none for a CPU tensor): `key`'s
// rows and cols, `weight` / `bias` null when absent, `out` like the input,
// `mean` / `rstd` of `key.rows` elements, `eps` as the kernel takes it. False
// when the launch failed (nothing was written). May throw (the workspace's
// allocation): the trampolines catch it.
bool launchLayerNormPlan(const Plan& plan, const VariantKey& key, const at::Tensor& input, const void* weight,
                         const void* bias, const at::Tensor& out, const at::Tensor& mean, const at::Tensor& rstd,
                         float eps);

}  // namespace hotkernel
