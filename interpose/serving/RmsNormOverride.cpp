#include "RmsNormOverride.h"

#include <ATen/ops/_fused_rms_norm_cuda_dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAStream.h>

#include "hotkernel/interpose/BackendKey.h"
#include "NormCall.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/VariantOptions.h"

namespace hotkernel {
namespace {

using Result = std::tuple<at::Tensor, at::Tensor>;

// Tries the planned kernel; nullopt means "run the original".
std::optional<Result> tryPlan(const at::Tensor& input, at::IntArrayRef normalizedShape,
                              const std::optional<at::Tensor>& weight, std::optional<double> eps) noexcept {
  try {
    std::optional<NormCall> call = normCallOf(input, normalizedShape, weight, std::nullopt);
    if (!call) return std::nullopt;
    const VariantKey& key = call->key;
    RmsNormOverride::state().noteDeviceUse(key.device);
    const Plan* plan = RmsNormOverride::state().plans.load()->find(key);
    if (!plan) return std::nullopt;
    const size_t align = plan->launcher->alignment();
    const void* w = kernels::hasWeight(key) ? weight->const_data_ptr() : nullptr;
    if (!pointerAligned(input.const_data_ptr(), align) || !pointerAligned(w, align)) return std::nullopt;
    at::Tensor out = at::empty(input.sizes(), input.options());
    at::Tensor rstd = at::empty(call->statShape, input.options().dtype(at::kFloat));
    if (!pointerAligned(out.const_data_ptr(), align)) return std::nullopt;
    const auto dtype = static_cast<kernels::DType>(key.dtype);
    const float e = eps ? static_cast<float>(*eps) : kernels::RmsNormFamily::defaultEps(dtype);
    void* stream = input.is_cuda() ? c10::cuda::getCurrentCUDAStream(input.device().index()).stream() : nullptr;
    const NormWorkspace work = normWorkspaceFor(*plan, input, stream);
    if (!plan->launcher->launchArgs(KernelArgs()
                                        .pointer(input.const_data_ptr())
                                        .pointer(w)
                                        .pointer(out.mutable_data_ptr())
                                        .pointer(rstd.mutable_data_ptr())
                                        .int64(key.rows)
                                        .int64(key.cols)
                                        .float32(e)
                                        .pointer(work.partials)
                                        .pointer(work.counter),
                                    stream)) {
      return std::nullopt;
    }
    return Result{out, rstd};
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "rms-norm-trampoline-error")
        << "error in the _fused_rms_norm trampoline, using the ATen kernel: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "rms-norm-trampoline-error")
        << "unknown error in the _fused_rms_norm trampoline; using ATen";
  }
  return std::nullopt;
}

Result rmsNormTrampoline(c10::DispatchKeySet ks, const at::Tensor& input, at::IntArrayRef normalizedShape,
                         const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  OverrideState& s = RmsNormOverride::state();
  if (servingEnabled()) {
    if (std::optional<Result> r = tryPlan(input, normalizedShape, weight, eps)) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(*r);
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return RmsNormOverride::callOriginal(ks, input, normalizedShape, weight, eps);
}

}  // namespace

Result RmsNormOverride::callOriginal(c10::DispatchKeySet ks, const at::Tensor& input, at::IntArrayRef normalizedShape,
                                     const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  OverrideState& s = RmsNormOverride::state();
  const c10::DispatchKey key = installedKeyOf(ks, s.installed);
  if (key == c10::DispatchKey::CUDA) return at::cuda::_fused_rms_norm(input, normalizedShape, weight, eps);
  const auto& original = s.originals[static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value() && s.op.has_value(), "hotkernel: no original _fused_rms_norm kernel for ",
              c10::toString(key));
  torch::jit::Stack stack{input, normalizedShape.vec(), weight, eps};
  original->callBoxed(*s.op, ks, &stack);
  return {std::move(stack[0]).toTensor(), std::move(stack[1]).toTensor()};
}

void RmsNormOverride::install(c10::DispatchKey key) {
  state().installOnce(key, kOpName,
                      [](torch::Library& lib) { lib.impl("_fused_rms_norm", TORCH_FN(rmsNormTrampoline)); });
}

OverrideState& RmsNormOverride::state() {
  static OverrideState* s = new OverrideState();  // leaked: the dispatcher may call the trampoline during exit
  return *s;
}

// aten::_fused_rms_norm(input, normalized_shape, weight?, eps?): the key normCallOf gives.
std::optional<VariantKey> RmsNormOverride::recordedKey(const at::RecordFunction& call) {
  return recordedNormKey(call, /*hasBiasArgument=*/false);
}

}  // namespace hotkernel
