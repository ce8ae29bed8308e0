#include "MmPadOverride.h"

#include <ATen/ops/mm_cuda_dispatch.h>
#include <c10/cuda/CUDAStream.h>

#include "FamilyDType.h"
#include "hotkernel/interpose/BackendKey.h"
#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/runtime/PaddedGemm.h"

namespace hotkernel {
namespace {

// Tries the planned padded GEMM; nullopt means "run the original".
std::optional<at::Tensor> tryPlan(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& mat2) noexcept {
  try {
    std::optional<VariantKey> key = MmPadOverride::keyOf(self, mat2);
    if (!key) return std::nullopt;
    MmPadOverride::state().noteDeviceUse(key->device);
    const Plan* plan = MmPadOverride::state().plans.load()->find(*key);
    if (!plan) return std::nullopt;
    void* stream = self.is_cuda() ? c10::cuda::getCurrentCUDAStream(self.device().index()).stream() : nullptr;
    at::Tensor out = runPaddedMm(*plan->launcher, self, mat2, at::Tensor(), kernels::mmPadVariantOf(*key).paddedN(),
                                 [ks](const at::Tensor& a, const at::Tensor& b, const at::Tensor&) {
                                   return MmPadOverride::callOriginal(ks, a, b);
                                 },
                                 stream);
    if (!out.defined()) return std::nullopt;
    return out;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "mm-pad-trampoline-error") << "error in the mm trampoline, using the ATen kernel: "
                                                         << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "mm-pad-trampoline-error") << "unknown error in the mm trampoline; using ATen";
  }
  return std::nullopt;
}

at::Tensor mmTrampoline(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& mat2) {
  OverrideState& s = MmPadOverride::state();
  if (servingEnabled()) {
    if (std::optional<at::Tensor> r = tryPlan(ks, self, mat2)) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(*r);
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return MmPadOverride::callOriginal(ks, self, mat2);
}

}  // namespace

std::optional<VariantKey> MmPadOverride::keyOf(const at::Tensor& self, const at::Tensor& mat2) {
  if (!self.defined() || !mat2.defined() || self.dim() != 2 || mat2.dim() != 2) return std::nullopt;
  if (self.scalar_type() != mat2.scalar_type() || self.device() != mat2.device()) return std::nullopt;
  if (self.is_conj() || mat2.is_conj() || self.is_neg() || mat2.is_neg()) return std::nullopt;
  const std::optional<kernels::DType> dtype = familyDTypeOf(self.scalar_type());
  if (!dtype) return std::nullopt;
  const int64_t m = self.size(0), k = self.size(1), n = mat2.size(1);
  if (mat2.size(0) != k || m < 1 || k < 1 || n < 1) return std::nullopt;
  // self [M, K] row-major; mat2 [K, N] the transpose of a contiguous [N, K].
  if (self.stride(1) != 1 || (m > 1 && self.stride(0) != k)) return std::nullopt;
  if (mat2.stride(0) != 1 || (n > 1 && mat2.stride(1) != k)) return std::nullopt;
  const kernels::MmPadVariant v{*dtype, m, n, k};
  if (!kernels::MmPadFamily::guardVariant(v)) return std::nullopt;
  return kernels::mmPadKeyOf(v, self.is_cuda() ? self.device().index() : -1);
}

std::optional<VariantKey> MmPadOverride::recordedKey(const at::RecordFunction& call) {
  if (call.num_inputs() < 2) return std::nullopt;
  auto inputs = call.inputs();
  if (!inputs[0].isTensor() || !inputs[1].isTensor()) return std::nullopt;
  return keyOf(inputs[0].toTensor(), inputs[1].toTensor());
}

at::Tensor MmPadOverride::callOriginal(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& mat2) {
  OverrideState& s = state();
  const c10::DispatchKey key = installedKeyOf(ks, s.installed);
  if (key == c10::DispatchKey::CUDA) return at::cuda::mm(self, mat2);
  const auto& original = s.originals[static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value() && s.op.has_value(), "hotkernel: no original mm kernel for ", c10::toString(key));
  torch::jit::Stack stack{self, mat2};
  original->callBoxed(*s.op, ks, &stack);
  return std::move(stack[0]).toTensor();
}

void MmPadOverride::install(c10::DispatchKey key) {
  state().installOnce(key, kOpName, [](torch::Library& lib) { lib.impl("mm", TORCH_FN(mmTrampoline)); });
}

OverrideState& MmPadOverride::state() {
  static OverrideState* s = new OverrideState();  // leaked: the dispatcher may call the trampoline during exit
  return *s;
}

}  // namespace hotkernel
