#include "OverrideState.h"

#include "hotkernel/runtime/IdleGate.h"

namespace hotkernel {
namespace {

std::atomic<bool>& servingSwitch() {
  static std::atomic<bool>* on = new std::atomic<bool>(true);  // leaked: read by trampolines during exit
  return *on;
}

}  // namespace

bool servingEnabled() noexcept { return servingSwitch().load(std::memory_order_relaxed); }
bool setServingEnabled(bool enabled) noexcept { return servingSwitch().exchange(enabled); }

void OverrideState::noteDeviceUse(int device) {
  if (device < 0) return;
  IdleGate::instance().noteActivity();
  if (device < kMaxDevices && !deviceReady[device].load(std::memory_order_acquire)) {
    DeviceHook hook = deviceHook.load();
    if (hook && hook(device)) deviceReady[device].store(true, std::memory_order_release);
  }
}

bool pointerAligned(const void* ptr, size_t alignment) {
  return alignment == 0 || reinterpret_cast<uintptr_t>(ptr) % alignment == 0;
}

}  // namespace hotkernel
