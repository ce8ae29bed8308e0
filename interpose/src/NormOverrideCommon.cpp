#include "NormOverrideCommon.h"

#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/IdleGate.h"
#include "FamilyDType.h"

namespace hotkernel {
namespace {

// A defined weight or bias the kernels can take: the input's dtype and
// device, contiguous, shaped like the normalized dims.
bool usableColumn(const at::Tensor& t, const at::Tensor& input, at::IntArrayRef normalizedShape) {
  return t.scalar_type() == input.scalar_type() && t.device() == input.device() && t.is_contiguous() &&
         t.sizes() == normalizedShape;
}

}  // namespace

std::optional<NormCall> normCallOf(const at::Tensor& input, at::IntArrayRef normalizedShape,
                                   const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias) {
  if (!input.defined() || input.numel() == 0 || !input.is_contiguous()) return std::nullopt;
  const std::optional<kernels::DType> code = familyDTypeOf(input.scalar_type());
  if (!code) return std::nullopt;
  const int64_t nd = input.dim(), nn = static_cast<int64_t>(normalizedShape.size());
  if (nn < 1 || nd < nn) return std::nullopt;
  if (input.sizes().slice(nd - nn) != normalizedShape) return std::nullopt;
  NormCall call;
  call.key.dtype = static_cast<int32_t>(*code);
  call.key.device = input.is_cpu() ? -1 : input.device().index();
  call.key.cols = 1;
  for (int64_t d : normalizedShape) call.key.cols *= d;
  call.key.rows = input.numel() / call.key.cols;
  if (weight && weight->defined()) {
    if (!usableColumn(*weight, input, normalizedShape)) return std::nullopt;
    call.key.flags |= VariantKey::kHasWeight;
  }
  if (bias && bias->defined()) {
    if (!usableColumn(*bias, input, normalizedShape)) return std::nullopt;
    call.key.flags |= VariantKey::kHasBias;
  }
  call.statShape.assign(input.sizes().begin(), input.sizes().begin() + (nd - nn));
  call.statShape.insert(call.statShape.end(), static_cast<size_t>(nn), 1);
  return call;
}

void NormOverrideState::noteDeviceUse(int device) {
  if (device < 0) return;
  IdleGate::instance().noteActivity();
  if (device < kMaxDevices && !deviceReady[device].load(std::memory_order_acquire)) {
    DeviceHook hook = deviceHook.load();
    if (hook && hook(device)) deviceReady[device].store(true, std::memory_order_release);
  }
}

bool normPointerAligned(const void* ptr, size_t alignment) {
  return alignment == 0 || reinterpret_cast<uintptr_t>(ptr) % alignment == 0;
}

}  // namespace hotkernel
