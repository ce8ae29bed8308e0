#include "GroupNormOverride.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/native_group_norm_cuda_dispatch.h>

#include "FamilyDType.h"
#include "NormCall.h"
#include "RecordedArgs.h"
#include "hotkernel/interpose/BackendKey.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/kernels/VariantOptions.h"

namespace hotkernel {
namespace {

using Result = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// A defined weight or bias the kernel can take: the input's dtype and device, contiguous, [C].
bool usableChannels(const at::Tensor& t, const at::Tensor& input, int64_t c) {
  return t.scalar_type() == input.scalar_type() && t.device() == input.device() && t.is_contiguous() &&
         t.dim() == 1 && t.size(0) == c;
}

std::optional<Result> tryPlan(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                              const std::optional<at::Tensor>& bias, const c10::SymInt& symN, const c10::SymInt& symC,
                              const c10::SymInt& symHw, int64_t group, double eps) noexcept {
  try {
    // Symbolic sizes (tracing, export) are never served.
    const std::optional<int64_t> n = symN.maybe_as_int(), c = symC.maybe_as_int(), hw = symHw.maybe_as_int();
    if (!n || !c || !hw) return std::nullopt;
    std::optional<VariantKey> key = groupNormKeyOfCall(input, weight, bias, *n, *c, *hw, group);
    if (!key) return std::nullopt;
    GroupNormOverride::state().noteDeviceUse(key->device);
    const Plan* plan = GroupNormOverride::state().plans.load()->find(*key);
    if (!plan) return std::nullopt;
    const size_t align = plan->launcher->alignment();
    if (!pointerAligned(input.const_data_ptr(), align)) return std::nullopt;
    const void* w = kernels::hasWeight(*key) ? weight->const_data_ptr() : nullptr;
    const void* b = kernels::hasBias(*key) ? bias->const_data_ptr() : nullptr;
    at::Tensor out = at::empty(input.sizes(), input.options());
    at::Tensor mean = at::empty({*n, group}, input.options());
    at::Tensor rstd = at::empty({*n, group}, input.options());
    if (!pointerAligned(out.const_data_ptr(), align)) return std::nullopt;
    const float kernelEps = kernels::GroupNormFamily::kernelEps(static_cast<kernels::DType>(key->dtype), eps);
    if (!launchLayerNormPlan(*plan, *key, input, w, b, out, mean, rstd, kernelEps)) return std::nullopt;
    return Result{out, mean, rstd};
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "group-norm-trampoline-error")
        << "error in the native_group_norm trampoline, using the ATen kernel: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "group-norm-trampoline-error")
        << "unknown error in the native_group_norm trampoline; using ATen";
  }
  return std::nullopt;
}

Result groupNormTrampoline(c10::DispatchKeySet ks, const at::Tensor& input, const std::optional<at::Tensor>& weight,
                           const std::optional<at::Tensor>& bias, c10::SymInt n, c10::SymInt c, c10::SymInt hw,
                           int64_t group, double eps) {
  OverrideState& s = GroupNormOverride::state();
  if (servingEnabled()) {
    if (std::optional<Result> r = tryPlan(input, weight, bias, n, c, hw, group, eps)) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(*r);
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return GroupNormOverride::callOriginal(ks, input, weight, bias, std::move(n), std::move(c), std::move(hw), group,
                                         eps);
}

}  // namespace

std::optional<VariantKey> groupNormKeyOfCall(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                             const std::optional<at::Tensor>& bias, int64_t n, int64_t c, int64_t hw,
                                             int64_t group) {
  if (!input.defined() || input.numel() == 0 || !input.is_contiguous()) return std::nullopt;
  const std::optional<kernels::DType> code = familyDTypeOf(input.scalar_type());
  if (!code) return std::nullopt;
  if (n < 1 || c < 1 || hw < 2 || group < 1 || c % group != 0) return std::nullopt;
  int64_t nc = 0, elements = 0;
  if (__builtin_mul_overflow(n, c, &nc) || __builtin_mul_overflow(nc, hw, &elements) || elements != input.numel()) {
    return std::nullopt;
  }
  const bool hasWeight = weight && weight->defined(), hasBias = bias && bias->defined();
  if (hasWeight && !usableChannels(*weight, input, c)) return std::nullopt;
  if (hasBias && !usableChannels(*bias, input, c)) return std::nullopt;
  const kernels::GroupNormVariant v{*code, n * group, (c / group) * hw, group, hw, hasWeight, hasBias};
  if (!kernels::GroupNormFamily::guardVariant(v)) return std::nullopt;
  return kernels::groupNormKeyOf(v, input.is_cpu() ? -1 : input.device().index());
}

Result GroupNormOverride::callOriginal(c10::DispatchKeySet ks, const at::Tensor& input,
                                       const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                       c10::SymInt n, c10::SymInt c, c10::SymInt hw, int64_t group, double eps) {
  OverrideState& s = GroupNormOverride::state();
  const c10::DispatchKey key = installedKeyOf(ks, s.installed);
  if (key == c10::DispatchKey::CUDA) {
    return at::cuda::native_group_norm_symint(input, weight, bias, std::move(n), std::move(c), std::move(hw), group,
                                              eps);
  }
  const auto& original = s.originals[static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value() && s.op.has_value(), "hotkernel: no original native_group_norm kernel for ",
              c10::toString(key));
  torch::jit::Stack stack{input, weight, bias, std::move(n), std::move(c), std::move(hw), group, eps};
  original->callBoxed(*s.op, ks, &stack);
  return {std::move(stack[0]).toTensor(), std::move(stack[1]).toTensor(), std::move(stack[2]).toTensor()};
}

void GroupNormOverride::install(c10::DispatchKey key) {
  state().installOnce(key, kOpName,
                      [](torch::Library& lib) { lib.impl("native_group_norm", TORCH_FN(groupNormTrampoline)); });
}

OverrideState& GroupNormOverride::state() {
  static OverrideState* s = new OverrideState();  // leaked: the dispatcher may call the trampoline during exit
  return *s;
}

// aten::native_group_norm(input, weight?, bias?, N, C, HxW, group, eps).
std::optional<VariantKey> GroupNormOverride::recordedKey(const at::RecordFunction& call) {
  if (call.num_inputs() < 7u) return std::nullopt;
  auto inputs = call.inputs();
  if (!inputs[0].isTensor()) return std::nullopt;
  std::optional<at::Tensor> weight, bias;
  if (!recordedOptionalTensor(inputs[1], weight) || !recordedOptionalTensor(inputs[2], bias)) return std::nullopt;
  const std::optional<int64_t> n = recordedInt(inputs[3]), c = recordedInt(inputs[4]), hw = recordedInt(inputs[5]),
                               group = recordedInt(inputs[6]);
  if (!n || !c || !hw || !group) return std::nullopt;
  return groupNormKeyOfCall(inputs[0].toTensor(), weight, bias, *n, *c, *hw, *group);
}

}  // namespace hotkernel
