#include "hotkernel/interpose/CommandGate.h"

#include <dlfcn.h>

#include "hotkernel/hotkernel_shim.h"

namespace hotkernel::fusion {
namespace {

template <typename Fn>
Fn lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

class ShimGate final : public CommandGate {
 public:
  ShimGate()
      : version_(lookup<HotkernelShimVersionFn>("hotkernel_shim_command_hook_version")),
        setHook_(lookup<HotkernelShimSetFlushHookFn>("hotkernel_shim_set_flush_hook")),
        setPending_(lookup<HotkernelShimSetPendingFn>("hotkernel_shim_set_pending")),
        enter_(lookup<HotkernelShimGuardFn>("hotkernel_shim_enter_own")),
        leave_(lookup<HotkernelShimGuardFn>("hotkernel_shim_leave_own")),
        unwrapped_(lookup<HotkernelShimUnwrappedFn>("hotkernel_shim_unwrapped_entry_points")) {
    complete_ = version_ && setHook_ && setPending_ && enter_ && leave_ && unwrapped_ &&
                version_() == HOTKERNEL_SHIM_COMMAND_HOOK_VERSION;
  }

  bool covers() override { return complete_ && unwrapped_() == 0; }
  void setFlushHook(FlushHook hook) override {
    if (complete_) setHook_(hook);
  }
  void setPending(int count) override {
    if (complete_) setPending_(count);
  }
  void enterOwn() override {
    if (complete_) enter_();
  }
  void leaveOwn() override {
    if (complete_) leave_();
  }

 private:
  HotkernelShimVersionFn version_;
  HotkernelShimSetFlushHookFn setHook_;
  HotkernelShimSetPendingFn setPending_;
  HotkernelShimGuardFn enter_;
  HotkernelShimGuardFn leave_;
  HotkernelShimUnwrappedFn unwrapped_;
  bool complete_ = false;
};

}  // namespace

std::unique_ptr<CommandGate> shimCommandGate() { return std::make_unique<ShimGate>(); }

}  // namespace hotkernel::fusion
