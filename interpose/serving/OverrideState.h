#pragma once
// The state behind one served op's trampoline, one type for every op, and the
// one switch that routes all served ops to hotkernel kernels or to ATen.
//
// Note [One stateless trampoline per op]
// A served op's trampoline is registered once per dispatch key (CUDA in
// production; CPU in the tests) and holds no state of its own: it reads its
// op's OverrideState (the PlanSlot, Note [Hot swap without re-registration])
// and either launches the planned kernel or calls the original kernel: the
// unboxed at::cuda::<op> on CUDA, the SafeKernelFunction captured before the
// override on any other key. Nothing it does can throw into the caller except
// the original kernel's own errors.

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// Whether served ops run hotkernel kernels (true, the default) or always
// their originals. One switch for every op (the C API's hotkernel_set_enabled).
bool servingEnabled() noexcept;
// Sets the switch; returns its previous value.
bool setServingEnabled(bool enabled) noexcept;

// The state of one served op's override. Its owner leaks it: the dispatcher
// may call the trampoline during exit.
struct OverrideState {
  using DeviceHook = bool (*)(int device);
  // Every runtime key, the per-backend autograd keys included (AutogradCUDA:
  // cross_entropy_loss registers one, Note [Overriding a composite op]).
  static constexpr size_t kNumKeys = static_cast<size_t>(c10::DispatchKey::EndOfRuntimeBackendKeys) + 1;
  static constexpr int kMaxDevices = 64;

  PlanSlot plans;
  std::atomic<uint64_t> hits{0};    // calls served by a plan
  std::atomic<uint64_t> misses{0};  // calls that ran the original
  std::mutex installMu;
  // Written once per key under installMu before the trampoline is registered
  // for that key; read-only afterwards.
  std::array<std::optional<c10::SafeKernelFunction>, kNumKeys> originals;
  std::array<std::atomic<bool>, kNumKeys> installed{};
  std::optional<c10::OperatorHandle> op;  // Precondition for writing: installMu held
  // Called on the first CUDA call per device (before the plan lookup) until it
  // returns true: the engine loads cached kernels there (Note [Lazy GPU start]).
  std::atomic<DeviceHook> deviceHook{nullptr};
  std::array<std::atomic<bool>, kMaxDevices> deviceReady{};

  // For a CUDA call: notes serving activity (the idle gate) and runs the
  // device hook until it succeeds once for `device`. No-op for CPU (-1).
  void noteDeviceUse(int device);
  // Whether the trampoline is registered for `key`.
  bool installedFor(c10::DispatchKey key) const {
    const size_t idx = static_cast<size_t>(key);
    return idx < kNumKeys && installed[idx].load();
  }
  // Captures the original kernel for `key` and registers `registerImpl(lib)`'s
  // trampoline, once per key (idempotent). `overload`: the schema's overload
  // name ("dim_IntList" for aten::sum.dim_IntList; "" for none). Throws Error
  // for an unknown op or key.
  template <typename RegisterFn>
  void installOnce(c10::DispatchKey key, const char* opName, RegisterFn registerImpl, const char* overload = "");
};

// `ptr` is a multiple of `alignment` (nullptr passes: an absent array).
bool pointerAligned(const void* ptr, size_t alignment);

namespace detail {
class SilentWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};
}  // namespace detail

template <typename RegisterFn>
void OverrideState::installOnce(c10::DispatchKey key, const char* opName, RegisterFn registerImpl,
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
