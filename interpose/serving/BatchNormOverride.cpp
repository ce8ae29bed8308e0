#include "BatchNormOverride.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/native_batch_norm_cuda_dispatch.h>

#include "FamilyDType.h"
#include "NormCall.h"
#include "RecordedArgs.h"
#include "hotkernel/interpose/BackendKey.h"
#include "hotkernel/kernels/BatchNormFamily.h"

namespace hotkernel {
namespace {

using Result = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

bool given(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

std::optional<Result> tryPlan(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                              const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& runningMean,
                              const std::optional<at::Tensor>& runningVar, bool training, double eps) noexcept {
  try {
    std::optional<VariantKey> key = batchNormKeyOfCall(input, weight, bias, runningMean, runningVar, training);
    if (!key) return std::nullopt;
    BatchNormOverride::state().noteDeviceUse(key->device);
    const Plan* plan = BatchNormOverride::state().plans.load()->find(*key);
    if (!plan) return std::nullopt;
    const size_t align = plan->launcher->alignment();
    if (!pointerAligned(input.const_data_ptr(), align)) return std::nullopt;
    at::Tensor out = at::empty(input.sizes(), input.options());
    const auto statOpts = input.options().dtype(at::kFloat);
    at::Tensor mean = at::empty({key->rows}, statOpts);
    at::Tensor invstd = at::empty({key->rows}, statOpts);
    if (!pointerAligned(out.const_data_ptr(), align)) return std::nullopt;
    if (!launchLayerNormPlan(*plan, *key, input, nullptr, nullptr, out, mean, invstd, static_cast<float>(eps))) {
      return std::nullopt;
    }
    return Result{out, mean, invstd};
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "batch-norm-trampoline-error")
        << "error in the native_batch_norm trampoline, using the ATen kernel: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "batch-norm-trampoline-error")
        << "unknown error in the native_batch_norm trampoline; using ATen";
  }
  return std::nullopt;
}

Result batchNormTrampoline(c10::DispatchKeySet ks, const at::Tensor& input, const std::optional<at::Tensor>& weight,
                           const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& runningMean,
                           const std::optional<at::Tensor>& runningVar, bool training, double momentum, double eps) {
  OverrideState& s = BatchNormOverride::state();
  if (servingEnabled()) {
    if (std::optional<Result> r = tryPlan(input, weight, bias, runningMean, runningVar, training, eps)) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(*r);
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return BatchNormOverride::callOriginal(ks, input, weight, bias, runningMean, runningVar, training, momentum, eps);
}

}  // namespace

std::optional<VariantKey> batchNormKeyOfCall(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                             const std::optional<at::Tensor>& bias,
                                             const std::optional<at::Tensor>& runningMean,
                                             const std::optional<at::Tensor>& runningVar, bool training) {
  if (!training || given(weight) || given(bias) || given(runningMean) || given(runningVar)) return std::nullopt;
  if (!input.defined() || input.dim() < 2 || input.size(0) != 1 || input.numel() == 0 || !input.is_contiguous()) {
    return std::nullopt;
  }
  const std::optional<kernels::DType> code = familyDTypeOf(input.scalar_type());
  if (!code) return std::nullopt;
  const int64_t channels = input.size(1);
  const kernels::LayerNormVariant v{*code, channels, input.numel() / channels, false, false};
  if (!kernels::LayerNormFamily::guardVariant(v)) return std::nullopt;
  return VariantKey{static_cast<int32_t>(*code), input.is_cpu() ? -1 : input.device().index(), v.rows, v.cols};
}

Result BatchNormOverride::callOriginal(c10::DispatchKeySet ks, const at::Tensor& input,
                                       const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                       const std::optional<at::Tensor>& runningMean,
                                       const std::optional<at::Tensor>& runningVar, bool training, double momentum,
                                       double eps) {
  OverrideState& s = BatchNormOverride::state();
  const c10::DispatchKey key = installedKeyOf(ks, s.installed);
  if (key == c10::DispatchKey::CUDA) {
    return at::cuda::native_batch_norm(input, weight, bias, runningMean, runningVar, training, momentum, eps);
  }
  const auto& original = s.originals[static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value() && s.op.has_value(), "hotkernel: no original native_batch_norm kernel for ",
              c10::toString(key));
  torch::jit::Stack stack{input, weight, bias, runningMean, runningVar, training, momentum, eps};
  original->callBoxed(*s.op, ks, &stack);
  return {std::move(stack[0]).toTensor(), std::move(stack[1]).toTensor(), std::move(stack[2]).toTensor()};
}

void BatchNormOverride::install(c10::DispatchKey key) {
  state().installOnce(key, kOpName,
                      [](torch::Library& lib) { lib.impl("native_batch_norm", TORCH_FN(batchNormTrampoline)); });
}

OverrideState& BatchNormOverride::state() {
  static OverrideState* s = new OverrideState();  // leaked: the dispatcher may call the trampoline during exit
  return *s;
}

// aten::native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps).
std::optional<VariantKey> BatchNormOverride::recordedKey(const at::RecordFunction& call) {
  if (call.num_inputs() < 6u) return std::nullopt;
  auto inputs = call.inputs();
  if (!inputs[0].isTensor() || !inputs[5].isBool()) return std::nullopt;
  std::optional<at::Tensor> weight, bias, runningMean, runningVar;
  if (!recordedOptionalTensor(inputs[1], weight) || !recordedOptionalTensor(inputs[2], bias) ||
      !recordedOptionalTensor(inputs[3], runningMean) || !recordedOptionalTensor(inputs[4], runningVar)) {
    return std::nullopt;
  }
  return batchNormKeyOfCall(inputs[0].toTensor(), weight, bias, runningMean, runningVar, inputs[5].toBool());
}

}  // namespace hotkernel
