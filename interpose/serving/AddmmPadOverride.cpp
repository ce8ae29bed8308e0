#include "AddmmPadOverride.h"

#include <ATen/ops/addmm_cuda_dispatch.h>
#include <c10/cuda/CUDAStream.h>

#include "MmPadOverride.h"
#include "hotkernel/interpose/BackendKey.h"
#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/PaddedGemm.h"

namespace hotkernel {
namespace {

// Tries the planned padded GEMM; nullopt means "run the original".
std::optional<at::Tensor> tryPlan(c10::DispatchKeySet ks, const at::Tensor& bias, const at::Tensor& mat1,
                                  const at::Tensor& mat2, const at::Scalar& beta, const at::Scalar& alpha) noexcept {
  try {
    std::optional<VariantKey> key = AddmmPadOverride::keyOf(bias, mat1, mat2);
    if (!key) return std::nullopt;
    AddmmPadOverride::state().noteDeviceUse(key->device);
    const Plan* plan = AddmmPadOverride::state().plans.load()->find(*key);
    if (!plan) return std::nullopt;
    void* stream = mat1.is_cuda() ? c10::cuda::getCurrentCUDAStream(mat1.device().index()).stream() : nullptr;
    at::Tensor out = runPaddedMm(*plan->launcher, mat1, mat2, bias, kernels::mmPadVariantOf(*key).paddedN(),
                                 [ks, &beta, &alpha](const at::Tensor& a, const at::Tensor& b, const at::Tensor& b8) {
                                   return AddmmPadOverride::callOriginal(ks, b8, a, b, beta, alpha);
                                 },
                                 stream);
    if (!out.defined()) return std::nullopt;
    return out;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "addmm-pad-trampoline-error")
        << "error in the addmm trampoline, using the ATen kernel: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "addmm-pad-trampoline-error") << "unknown error in the addmm trampoline; using ATen";
  }
  return std::nullopt;
}

at::Tensor addmmTrampoline(c10::DispatchKeySet ks, const at::Tensor& bias, const at::Tensor& mat1,
                           const at::Tensor& mat2, const at::Scalar& beta, const at::Scalar& alpha) {
  OverrideState& s = AddmmPadOverride::state();
  if (servingEnabled()) {
    if (std::optional<at::Tensor> r = tryPlan(ks, bias, mat1, mat2, beta, alpha)) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return std::move(*r);
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return AddmmPadOverride::callOriginal(ks, bias, mat1, mat2, beta, alpha);
}

}  // namespace

std::optional<VariantKey> AddmmPadOverride::keyOf(const at::Tensor& bias, const at::Tensor& mat1,
                                                  const at::Tensor& mat2) {
  std::optional<VariantKey> key = MmPadOverride::keyOf(mat1, mat2);
  if (!key || !bias.defined() || bias.dim() != 1 || bias.size(0) != key->cols) return std::nullopt;
  if (bias.scalar_type() != mat1.scalar_type() || bias.device() != mat1.device()) return std::nullopt;
  if (bias.is_conj() || bias.is_neg() || (bias.size(0) > 1 && bias.stride(0) != 1)) return std::nullopt;
  key->options = kernels::variant_options::kBias;
  return key;
}

std::optional<VariantKey> AddmmPadOverride::recordedKey(const at::RecordFunction& call) {
  if (call.num_inputs() < 3) return std::nullopt;
  auto inputs = call.inputs();
  if (!inputs[0].isTensor() || !inputs[1].isTensor() || !inputs[2].isTensor()) return std::nullopt;
  return keyOf(inputs[0].toTensor(), inputs[1].toTensor(), inputs[2].toTensor());
}

at::Tensor AddmmPadOverride::callOriginal(c10::DispatchKeySet ks, const at::Tensor& bias, const at::Tensor& mat1,
                                          const at::Tensor& mat2, const at::Scalar& beta, const at::Scalar& alpha) {
  OverrideState& s = state();
  const c10::DispatchKey key = installedKeyOf(ks, s.installed);
  if (key == c10::DispatchKey::CUDA) return at::cuda::addmm(bias, mat1, mat2, beta, alpha);
  const auto& original = s.originals[static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value() && s.op.has_value(), "hotkernel: no original addmm kernel for ",
              c10::toString(key));
  torch::jit::Stack stack{bias, mat1, mat2, beta, alpha};
  original->callBoxed(*s.op, ks, &stack);
  return std::move(stack[0]).toTensor();
}

void AddmmPadOverride::install(c10::DispatchKey key) {
  state().installOnce(key, kOpName, [](torch::Library& lib) { lib.impl("addmm", TORCH_FN(addmmTrampoline)); });
}

OverrideState& AddmmPadOverride::state() {
  static OverrideState* s = new OverrideState();  // leaked: the dispatcher may call the trampoline during exit
  return *s;
}

}  // namespace hotkernel
