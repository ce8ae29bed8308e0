#pragma once
// What the aten::_fused_rms_norm and aten::native_layer_norm trampolines
// share (RmsNormOverride, LayerNormOverride): the variant key of a call and
// the per-op state behind one stateless trampoline (Note [One stateless
// trampoline per op] in SoftmaxOverride.h).

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"
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

// The state of one norm op's override. Leaked by its owner: the dispatcher
// may call the trampoline during exit.
struct NormOverrideState {
  using DeviceHook = bool (*)(int device);
  // Every runtime key, the per-backend autograd keys included (AutogradCUDA:
  // cross_entropy_loss registers one, Note [Overriding a composite op]).
  static constexpr size_t kNumKeys = static_cast<size_t>(c10::DispatchKey::EndOfRuntimeBackendKeys) + 1;
  static constexpr int kMaxDevices = 64;

  PlanSlot plans;
  std::atomic<bool> enabled{true};
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> misses{0};
  std::mutex installMu;
  // Written once per key under installMu before the trampoline is registered
  // for that key; read-only afterwards.
  std::array<std::optional<c10::SafeKernelFunction>, kNumKeys> originals;
  std::array<std::atomic<bool>, kNumKeys> installed{};
  std::optional<c10::OperatorHandle> op;
  std::atomic<DeviceHook> deviceHook{nullptr};
  std::array<std::atomic<bool>, kMaxDevices> deviceReady{};

  // For a CUDA call: notes serving activity (the idle gate) and runs the
  // device hook until it succeeds once for `device`. No-op for CPU (-1).
  void noteDeviceUse(int device);
  // Captures the original kernel for `key` and registers `install(lib)`'s
  // trampoline, once per key (idempotent). `overload`: the schema's overload
  // name ("dim_IntList" for aten::sum.dim_IntList; "" for none). Throws Error
  // for an unknown op or key.
  template <typename RegisterFn>
  void installOnce(c10::DispatchKey key, const char* opName, RegisterFn registerImpl, const char* overload = "");
};

// `ptr` is a multiple of `alignment` (nullptr passes: an absent array).
bool normPointerAligned(const void* ptr, size_t alignment);

}  // namespace hotkernel

namespace hotkernel {

namespace detail {
class SilentWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};
}  // namespace detail

template <typename RegisterFn>
void NormOverrideState::installOnce(c10::DispatchKey key, const char* opName, RegisterFn registerImpl,
                                    const char* overload) {
  const size_t idx = static_cast<size_t>(key);
  HOTKERNEL_CHECK(idx < kNumKeys, "dispatch key out of range");
  std::lock_guard<std::mutex> guard(installMu);
  if (installed[idx].load()) return;
  if (!op) op = c10::Dispatcher::singleton().findSchemaOrThrow(opName, overload);
  // Capture the original before the override replaces it.
  originals[idx] = op->getComputedKernelForDispatchKey(key);
  detail::SilentWarnings silent;
  c10::WarningUtils::WarningHandlerGuard warnings(&silent);
  // Leaked: deregistering while serving is unsafe, and libhotkernel is never unloaded.
  auto* lib = new torch::Library(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  registerImpl(*lib);
  installed[idx].store(true);
  HOTKERNEL_LOG(Debug) << "installed the " << opName << " trampoline for " << c10::toString(key);
}

}  // namespace hotkernel
