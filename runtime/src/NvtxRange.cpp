#include "hotkernel/runtime/NvtxRange.h"

#include <nvtx3/nvToolsExt.h>

#include <atomic>

#include "hotkernel/runtime/Config.h"

namespace hotkernel {
namespace {

// -1: not overridden (HOTKERNEL_NVTX decides); 0 / 1: setNvtxRanges's value.
std::atomic<int> rangesOverride{-1};

// Note [NVTX ranges around plan launches]: created on the first name
// registered with ranges on, never destroyed.
nvtxDomainHandle_t hotkernelDomain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("hotkernel");
  return domain;
}

}  // namespace

bool nvtxRangesEnabled() {
  const int o = rangesOverride.load(std::memory_order_acquire);
  return o < 0 ? config().nvtx : o != 0;
}

void setNvtxRanges(bool enabled) { rangesOverride.store(enabled ? 1 : 0, std::memory_order_release); }

struct NvtxRangeName::Impl {
  nvtxDomainHandle_t domain = nullptr;
  std::string name;  // the ASCII message when no tool registered the string
  nvtxEventAttributes_t attributes{};
};

NvtxRangeName::NvtxRangeName() = default;
NvtxRangeName::~NvtxRangeName() = default;
NvtxRangeName::NvtxRangeName(NvtxRangeName&&) noexcept = default;
NvtxRangeName& NvtxRangeName::operator=(NvtxRangeName&&) noexcept = default;

NvtxRangeName NvtxRangeName::registered(const std::string& name) {
  NvtxRangeName out;
  if (!nvtxRangesEnabled()) return out;
  auto impl = std::make_unique<Impl>();
  impl->domain = hotkernelDomain();
  impl->name = name;
  nvtxEventAttributes_t& a = impl->attributes;
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  // A tool that registers strings gets the handle; without a tool the handle
  // is null and every call is a no-op; a tool that does not register strings
  // gets the text, which lives as long as this name.
  const nvtxStringHandle_t handle = nvtxDomainRegisterStringA(impl->domain, impl->name.c_str());
  if (handle != nullptr) {
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = handle;
  } else {
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = impl->name.c_str();
  }
  out.impl_ = std::move(impl);
  return out;
}

void NvtxRangeName::push() const noexcept {
  if (impl_) nvtxDomainRangePushEx(impl_->domain, &impl_->attributes);
}

void NvtxRangeName::pop() const noexcept {
  if (impl_) nvtxDomainRangePop(impl_->domain);
}

}  // namespace hotkernel
