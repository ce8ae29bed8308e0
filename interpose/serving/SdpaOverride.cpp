#include "SdpaOverride.h"

#include <ATen/core/grad_mode.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/scaled_dot_product_attention_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/scaled_dot_product_attention_ops.h>

#include "FamilyDType.h"
#include "RecordedArgs.h"
#include "hotkernel/kernels/SdpaFamily.h"
#include "hotkernel/runtime/AttentionBackendCall.h"
#include "hotkernel/runtime/AttentionDefaults.h"
#include "hotkernel/runtime/Logging.h"

// Note [The user's backend switches]
// A process may switch PyTorch's attention backends off
// (torch.backends.cuda.enable_flash_sdp(False), the sdpa_kernel context) or
// reorder them (sdpa_kernel(..., set_priority=True)). The served call honours
// that: the chosen backend runs only while PyTorch itself may use it and the
// priority order is the one PyTorch settles on by itself (Note [PyTorch's
// settled priority order]); otherwise the composite runs and picks under the
// process's switches (the choice was measured against PyTorch's default
// pick, which no longer holds).

namespace hotkernel {
namespace {

// Note [PyTorch's settled priority order]: PyTorch's own selection for the
// first call, before the call runs anything else.
void settleDefaults(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                    const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                    std::optional<double> scale, bool enableGqa) noexcept {
  AttentionDefaults& defaults = AttentionDefaults::process();
  if (defaults.settled()) return;
  try {
    defaults.settleOn(query, key, value, attnMask, dropoutP, isCausal, scale, enableGqa);
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Info, "sdpa-settle") << "PyTorch's attention selection failed for a call; its own choice "
                                               "runs until one succeeds: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Info, "sdpa-settle") << "PyTorch's attention selection failed for a call (unknown error)";
  }
}

bool aligned(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % kernels::SdpaChoice::kAlignment == 0;
}

// Runs the published choice; nullopt means "run the original".
std::optional<at::Tensor> tryPlan(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                  const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                                  std::optional<double> scale, bool enableGqa) noexcept {
  try {
    // The guard before anything else: refused calls touch nothing.
    const std::optional<VariantKey> k = sdpaKeyOf(query, key, value, attnMask, dropoutP, isCausal, enableGqa);
    if (!k) return std::nullopt;
    SdpaOverride::state().noteDeviceUse(k->device);
    const Plan* plan = SdpaOverride::state().plans.load()->find(*k);
    if (!plan) return std::nullopt;
    const auto* choice = dynamic_cast<const kernels::SdpaChoice*>(plan->launcher.get());
    if (choice == nullptr || !aligned(query) || !aligned(key) || !aligned(value)) return std::nullopt;
    if (!AttentionDefaults::process().allows(choice->backend())) {
      HOTKERNEL_LOG_ONCE(Info, "sdpa-switches")
          << "attention backends switched or reordered by the process: PyTorch's own choice runs "
             "(Note [The user's backend switches])";
      return std::nullopt;
    }
    return runAttentionBackend(choice->backend(), query, key, value, isCausal, scale, enableGqa);
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "sdpa-trampoline-error")
        << "error in the scaled_dot_product_attention trampoline, using PyTorch's own choice: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "sdpa-trampoline-error")
        << "unknown error in the scaled_dot_product_attention trampoline; using PyTorch's own choice";
  }
  return std::nullopt;
}

// The backend key's trampoline (Note [Overriding a composite op]).
at::Tensor sdpaTrampoline(c10::DispatchKeySet, const at::Tensor& query, const at::Tensor& key,
                          const at::Tensor& value, const std::optional<at::Tensor>& attnMask, double dropoutP,
                          bool isCausal, std::optional<double> scale, bool enableGqa) {
  OverrideState& s = SdpaOverride::state();
  settleDefaults(query, key, value, attnMask, dropoutP, isCausal, scale, enableGqa);
  if (servingEnabled()) {
    if (std::optional<at::Tensor> r = tryPlan(query, key, value, attnMask, dropoutP, isCausal, scale, enableGqa)) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(*r);
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return SdpaOverride::callOriginal(query, key, value, attnMask, dropoutP, isCausal, scale, enableGqa);
}

// The autograd key's trampoline: the composite when a gradient is needed,
// else below autograd to the backend trampoline.
at::Tensor sdpaAutogradTrampoline(c10::DispatchKeySet ks, const at::Tensor& query, const at::Tensor& key,
                                  const at::Tensor& value, const std::optional<at::Tensor>& attnMask,
                                  double dropoutP, bool isCausal, std::optional<double> scale, bool enableGqa) {
  settleDefaults(query, key, value, attnMask, dropoutP, isCausal, scale, enableGqa);
  if (sdpaNeedsGrad(query, key, value, attnMask)) {
    return SdpaOverride::callOriginal(query, key, value, attnMask, dropoutP, isCausal, scale, enableGqa);
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return at::_ops::scaled_dot_product_attention::redispatch(ks & c10::after_autograd_keyset, query, key, value,
                                                            attnMask, dropoutP, isCausal, scale, enableGqa);
}

void describe(const at::Tensor& t, std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
  sizes.assign(t.sizes().begin(), t.sizes().end());
  strides.assign(t.strides().begin(), t.strides().end());
}

}  // namespace

std::optional<VariantKey> sdpaKeyOf(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                    const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                                    bool enableGqa) {
  if (!query.defined() || !key.defined() || !value.defined()) return std::nullopt;
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4) return std::nullopt;  // no copies for the common refusal
  const bool dense = !query.is_nested() && !key.is_nested() && !value.is_nested() &&
                     query.layout() == at::kStrided && key.layout() == at::kStrided &&
                     value.layout() == at::kStrided;
  if (!dense) return std::nullopt;
  // Every call of the served op comes here: one description per thread whose
  // vectors keep their capacity. Every field is set below.
  thread_local kernels::SdpaCall call;
  const std::optional<kernels::DType> dtype = familyDTypeOf(query.scalar_type());
  call.dtypeServed = dtype.has_value();
  call.dtype = dtype.value_or(kernels::DType::Float32);
  call.sameDtypes = key.scalar_type() == query.scalar_type() && value.scalar_type() == query.scalar_type();
  call.sameDevice = key.device() == query.device() && value.device() == query.device();
  call.dense = dense;
  describe(query, call.querySizes, call.queryStrides);
  describe(key, call.keySizes, call.keyStrides);
  describe(value, call.valueSizes, call.valueStrides);
  call.hasMask = attnMask.has_value() && attnMask->defined();
  call.dropoutP = dropoutP;
  call.isCausal = isCausal;
  call.enableGqa = enableGqa;
  kernels::SdpaVariant v;
  if (!kernels::SdpaFamily::guardCall(call, &v)) return std::nullopt;
  return kernels::sdpaKeyOf(v, query.is_cpu() ? -1 : query.device().index());
}

bool sdpaNeedsGrad(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                   const std::optional<at::Tensor>& attnMask) {
  auto needs = [](const at::Tensor& t) {
    return t.defined() && ((at::GradMode::is_enabled() && t.requires_grad()) || t._fw_grad(/*level=*/0).defined());
  };
  return needs(query) || needs(key) || needs(value) || (attnMask.has_value() && needs(*attnMask));
}

at::Tensor SdpaOverride::callOriginal(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                      const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                                      std::optional<double> scale, bool enableGqa) {
  return at::compositeimplicitautograd::scaled_dot_product_attention(query, key, value, attnMask, dropoutP, isCausal,
                                                                     scale, enableGqa);
}

void SdpaOverride::install(c10::DispatchKey backendKey) {
  // Note [The user's backend switches]: the order PyTorch starts with, before any user code can change it.
  AttentionDefaults::process().remember();
  const c10::DispatchKey autogradKey = c10::getAutogradKeyFromBackend(c10::toBackendComponent(backendKey));
  HOTKERNEL_CHECK(autogradKey != c10::DispatchKey::AutogradOther, "no autograd key for ",
                  c10::toString(backendKey));
  state().installOnce(autogradKey, kOpName, [](torch::Library& lib) {
    lib.impl("scaled_dot_product_attention", TORCH_FN(sdpaAutogradTrampoline));
  });
  state().installOnce(backendKey, kOpName, [](torch::Library& lib) {
    lib.impl("scaled_dot_product_attention", TORCH_FN(sdpaTrampoline));
  });
}

OverrideState& SdpaOverride::state() {
  static OverrideState* s = new OverrideState();  // leaked: the dispatcher may call the trampoline during exit
  return *s;
}

// aten::scaled_dot_product_attention(query, key, value, attn_mask?, dropout_p,
// is_causal, scale?, enable_gqa): the key sdpaKeyOf gives.
std::optional<VariantKey> SdpaOverride::recordedKey(const at::RecordFunction& call) {
  if (call.num_inputs() < 8) return std::nullopt;
  auto inputs = call.inputs();
  if (!inputs[0].isTensor() || !inputs[1].isTensor() || !inputs[2].isTensor() || !inputs[4].isDouble() ||
      !inputs[5].isBool() || !inputs[7].isBool()) {
    return std::nullopt;
  }
  std::optional<at::Tensor> mask;
  if (!recordedOptionalTensor(inputs[3], mask)) return std::nullopt;
  return sdpaKeyOf(inputs[0].toTensor(), inputs[1].toTensor(), inputs[2].toTensor(), mask, inputs[4].toDouble(),
                   inputs[5].toBool(), inputs[7].toBool());
}

}  // namespace hotkernel
