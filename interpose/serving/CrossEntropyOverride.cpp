#include "RecordedArgs.h"
#include "CrossEntropyOverride.h"

#include <ATen/core/grad_mode.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/cross_entropy_loss_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/cross_entropy_loss_ops.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAStream.h>

#include "NormCall.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/StreamWorkspace.h"
#include "FamilyDType.h"

namespace hotkernel {
namespace {

using kernels::CrossEntropyCall;
using kernels::CrossEntropyFamily;
using kernels::CrossEntropyVariant;
using kernels::DType;

bool aligned(const void* p, size_t alignment) {
  return p != nullptr && reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// Tries the planned kernel; nullopt means "run the original".
std::optional<at::Tensor> tryPlan(const at::Tensor& self, const at::Tensor& labels,
                                  const std::optional<at::Tensor>& weight, int64_t reduction,
                                  const c10::SymInt& ignoreIndex, double labelSmoothing) noexcept {
  try {
    // The guard before anything else: refused calls touch nothing.
    std::optional<VariantKey> key = crossEntropyKeyOf(self, labels, weight, reduction, labelSmoothing);
    if (!key) return std::nullopt;
    const std::optional<int64_t> ignore = ignoreIndex.maybe_as_int();
    if (!ignore) return std::nullopt;  // symbolic: not a call to serve
    CrossEntropyOverride::state().noteDeviceUse(key->device);
    const Plan* plan = CrossEntropyOverride::state().plans.load()->find(*key);
    if (!plan) return std::nullopt;
    if (!aligned(self.const_data_ptr(), plan->launcher->alignment()) || !aligned(labels.const_data_ptr(), 8)) {
      return std::nullopt;
    }
    const bool reduced = reduction != at::Reduction::None;
    at::Tensor out = reduced ? at::empty({}, self.options()) : at::empty({key->rows}, self.options());
    // None, and one row, need no workspace (CrossEntropyFamily::workspaceFloats).
    const int64_t workFloats = kernels::CrossEntropyFamily::workspaceFloats(
        CrossEntropyVariant{static_cast<kernels::DType>(key->dtype), key->rows, key->cols,
                            static_cast<kernels::CrossEntropyReduction>(kernels::reductionOf(*key))});
    // The stream of the launch, and of the workspace.
    void* stream = self.is_cuda() ? c10::cuda::getCurrentCUDAStream(self.device().index()).stream() : nullptr;
    // Losses and a counter that is 0 at launch, kept per stream (Note [A
    // persistent workspace per stream]): no allocation and no fill kernel.
    const at::Tensor work =
        workFloats > 0 ? StreamWorkspaces::global().forLaunchOn(workFloats, self, stream) : at::Tensor();
    if (!aligned(out.const_data_ptr(), self.element_size()) || (work.defined() && !aligned(work.const_data_ptr(), 4))) {
      return std::nullopt;
    }
    if (!plan->launcher->launchArgs(KernelArgs()
                                        .pointer(self.const_data_ptr())
                                        .pointer(labels.const_data_ptr())
                                        .pointer(out.mutable_data_ptr())
                                        .pointer(work.defined() ? work.const_data_ptr() : nullptr)
                                        .int64(key->rows)
                                        .int64(key->cols)
                                        .int64(*ignore),
                                    stream)) {
      return std::nullopt;
    }
    return out;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "cross-entropy-trampoline-error")
        << "error in the cross_entropy_loss trampoline, using the ATen composite: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "cross-entropy-trampoline-error")
        << "unknown error in the cross_entropy_loss trampoline; using the ATen composite";
  }
  return std::nullopt;
}

// The backend key's trampoline (Note [Overriding a composite op]).
at::Tensor crossEntropyTrampoline(c10::DispatchKeySet, const at::Tensor& self, const at::Tensor& labels,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, c10::SymInt ignoreIndex,
                                  double labelSmoothing) {
  OverrideState& s = CrossEntropyOverride::state();
  if (servingEnabled()) {
    if (std::optional<at::Tensor> r = tryPlan(self, labels, weight, reduction, ignoreIndex, labelSmoothing)) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(*r);
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return CrossEntropyOverride::callOriginal(self, labels, weight, reduction, std::move(ignoreIndex), labelSmoothing);
}

// The autograd key's trampoline: the composite when a gradient is needed,
// else below autograd to the backend trampoline.
at::Tensor crossEntropyAutogradTrampoline(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& labels,
                                          const std::optional<at::Tensor>& weight, int64_t reduction,
                                          c10::SymInt ignoreIndex, double labelSmoothing) {
  if (crossEntropyNeedsGrad(self, labels, weight)) {
    return CrossEntropyOverride::callOriginal(self, labels, weight, reduction, std::move(ignoreIndex),
                                              labelSmoothing);
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return at::_ops::cross_entropy_loss::redispatch(ks & c10::after_autograd_keyset, self, labels, weight, reduction,
                                                  std::move(ignoreIndex), labelSmoothing);
}

}  // namespace

std::optional<VariantKey> crossEntropyKeyOf(const at::Tensor& self, const at::Tensor& labels,
                                            const std::optional<at::Tensor>& weight, int64_t reduction,
                                            double labelSmoothing) {
  if (!self.defined() || !labels.defined()) return std::nullopt;
  if (self.dim() != 2 || labels.dim() != 1) return std::nullopt;  // the guard's first refusal, without copies
  // Every call of the served op comes here: one description per thread whose
  // vectors keep their capacity, so describing a call allocates nothing after
  // the first. Every field is set below.
  thread_local CrossEntropyCall call;
  const std::optional<DType> dtype = familyDTypeOf(self.scalar_type());
  call.logitsFloating = dtype.has_value();
  call.dtype = dtype.value_or(DType::Float32);
  call.logitsSizes.assign(self.sizes().begin(), self.sizes().end());
  call.logitsStrides.assign(self.strides().begin(), self.strides().end());
  call.labelsInt64 = labels.scalar_type() == at::kLong;
  call.labelsSizes.assign(labels.sizes().begin(), labels.sizes().end());
  call.labelsStrides.assign(labels.strides().begin(), labels.strides().end());
  call.sameDevice = self.device() == labels.device();
  call.hasWeight = weight.has_value() && weight->defined();
  call.labelSmoothing = labelSmoothing;
  call.reduction = reduction;
  CrossEntropyVariant v;
  if (!CrossEntropyFamily::guardCall(call, &v)) return std::nullopt;
  VariantKey key{static_cast<int32_t>(v.dtype), self.is_cpu() ? -1 : self.device().index(), v.rows, v.cols};
  key.options = kernels::reductionOptions(static_cast<int32_t>(v.reduction));
  return key;
}

bool crossEntropyNeedsGrad(const at::Tensor& self, const at::Tensor& labels, const std::optional<at::Tensor>& weight) {
  auto needs = [](const at::Tensor& t) {
    return t.defined() && ((at::GradMode::is_enabled() && t.requires_grad()) || t._fw_grad(/*level=*/0).defined());
  };
  return needs(self) || needs(labels) || (weight.has_value() && needs(*weight));
}

at::Tensor CrossEntropyOverride::callOriginal(const at::Tensor& self, const at::Tensor& labels,
                                              const std::optional<at::Tensor>& weight, int64_t reduction,
                                              c10::SymInt ignoreIndex, double labelSmoothing) {
  return at::compositeimplicitautograd::cross_entropy_loss_symint(self, labels, weight, reduction,
                                                                  std::move(ignoreIndex), labelSmoothing);
}

void CrossEntropyOverride::install(c10::DispatchKey backendKey) {
  const c10::DispatchKey autogradKey = c10::getAutogradKeyFromBackend(c10::toBackendComponent(backendKey));
  HOTKERNEL_CHECK(autogradKey != c10::DispatchKey::AutogradOther, "no autograd key for ",
                  c10::toString(backendKey));
  CrossEntropyOverride::state().installOnce(autogradKey, kOpName, [](torch::Library& lib) {
    lib.impl("cross_entropy_loss", TORCH_FN(crossEntropyAutogradTrampoline));
  });
  CrossEntropyOverride::state().installOnce(backendKey, kOpName, [](torch::Library& lib) {
    lib.impl("cross_entropy_loss", TORCH_FN(crossEntropyTrampoline));
  });
}

OverrideState& CrossEntropyOverride::state() {
  static OverrideState* s = new OverrideState();  // leaked: the dispatcher may call the trampoline during exit
  return *s;
}

// aten::cross_entropy_loss(self, labels, weight?, reduction, ignore_index,
// label_smoothing): the key crossEntropyKeyOf gives (its reduction option).
std::optional<VariantKey> CrossEntropyOverride::recordedKey(const at::RecordFunction& call) {
  if (call.num_inputs() < 6) return std::nullopt;
  auto inputs = call.inputs();
  if (!inputs[0].isTensor() || !inputs[1].isTensor() || !inputs[3].isInt() || !inputs[5].isDouble()) {
    return std::nullopt;
  }
  std::optional<at::Tensor> weight;
  if (!recordedOptionalTensor(inputs[2], weight)) return std::nullopt;
  return crossEntropyKeyOf(inputs[0].toTensor(), inputs[1].toTensor(), weight, inputs[3].toInt(),
                           inputs[5].toDouble());
}

}  // namespace hotkernel
