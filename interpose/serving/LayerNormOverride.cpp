#include "LayerNormOverride.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/native_layer_norm_cuda_dispatch.h>

#include "hotkernel/interpose/BackendKey.h"
#include "NormCall.h"
#include "hotkernel/kernels/VariantOptions.h"

namespace hotkernel {
namespace {

using Result = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// Tries the planned kernel; nullopt means "run the original".
std::optional<Result> tryPlan(const at::Tensor& input, c10::SymIntArrayRef symShape,
                              const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                              double eps) noexcept {
  try {
    // Symbolic sizes (tracing, export) are never served.
    std::optional<at::IntArrayRef> normalizedShape = c10::asIntArrayRefSlowOpt(symShape);
    if (!normalizedShape) return std::nullopt;
    std::optional<NormCall> call = normCallOf(input, *normalizedShape, weight, bias);
    if (!call) return std::nullopt;
    const VariantKey& key = call->key;
    LayerNormOverride::state().noteDeviceUse(key.device);
    const Plan* plan = LayerNormOverride::state().plans.load()->find(key);
    if (!plan) return std::nullopt;
    const size_t align = plan->launcher->alignment();
    const void* w = kernels::hasWeight(key) ? weight->const_data_ptr() : nullptr;
    const void* b = kernels::hasBias(key) ? bias->const_data_ptr() : nullptr;
    if (!pointerAligned(input.const_data_ptr(), align) || !pointerAligned(w, align) ||
        !pointerAligned(b, align)) {
      return std::nullopt;
    }
    at::Tensor out = at::empty(input.sizes(), input.options());
    const auto statOpts = input.options().dtype(at::kFloat);
    at::Tensor mean = at::empty(call->statShape, statOpts);
    at::Tensor rstd = at::empty(call->statShape, statOpts);
    if (!pointerAligned(out.const_data_ptr(), align)) return std::nullopt;
    if (!launchLayerNormPlan(*plan, key, input, w, b, out, mean, rstd, static_cast<float>(eps))) return std::nullopt;
    return Result{out, mean, rstd};
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "layer-norm-trampoline-error")
        << "error in the native_layer_norm trampoline, using the ATen kernel: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "layer-norm-trampoline-error")
        << "unknown error in the native_layer_norm trampoline; using ATen";
  }
  return std::nullopt;
}

Result layerNormTrampoline(c10::DispatchKeySet ks, const at::Tensor& input, c10::SymIntArrayRef normalizedShape,
                           const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                           double eps) {
  OverrideState& s = LayerNormOverride::state();
  if (servingEnabled()) {
    if (std::optional<Result> r = tryPlan(input, normalizedShape, weight, bias, eps)) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(*r);
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return LayerNormOverride::callOriginal(ks, input, normalizedShape, weight, bias, eps);
}

}  // namespace

Result LayerNormOverride::callOriginal(c10::DispatchKeySet ks, const at::Tensor& input,
                                       c10::SymIntArrayRef normalizedShape, const std::optional<at::Tensor>& weight,
                                       const std::optional<at::Tensor>& bias, double eps) {
  OverrideState& s = LayerNormOverride::state();
  const c10::DispatchKey key = installedKeyOf(ks, s.installed);
  if (key == c10::DispatchKey::CUDA) {
    return at::cuda::native_layer_norm_symint(input, normalizedShape, weight, bias, eps);
  }
  const auto& original = s.originals[static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value() && s.op.has_value(), "hotkernel: no original native_layer_norm kernel for ",
              c10::toString(key));
  torch::jit::Stack stack{input, normalizedShape, weight, bias, eps};
  original->callBoxed(*s.op, ks, &stack);
  return {std::move(stack[0]).toTensor(), std::move(stack[1]).toTensor(), std::move(stack[2]).toTensor()};
}

void LayerNormOverride::install(c10::DispatchKey key) {
  state().installOnce(key, kOpName,
                      [](torch::Library& lib) { lib.impl("native_layer_norm", TORCH_FN(layerNormTrampoline)); });
}

OverrideState& LayerNormOverride::state() {
  static OverrideState* s = new OverrideState();  // leaked: the dispatcher may call the trampoline during exit
  return *s;
}

// aten::native_layer_norm(input, normalized_shape, weight?, bias?, eps): the key normCallOf gives.
std::optional<VariantKey> LayerNormOverride::recordedKey(const at::RecordFunction& call) {
  return recordedNormKey(call, /*hasBiasArgument=*/true);
}

}  // namespace hotkernel
