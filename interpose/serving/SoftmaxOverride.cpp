#include "SoftmaxOverride.h"

#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/library.h>


#include "hotkernel/interpose/BackendKey.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/SoftmaxDimFamily.h"
#include "hotkernel/runtime/KernelArgs.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"
#include "FamilyDType.h"

namespace hotkernel {
namespace {

using Op = SoftmaxOverride::Op;

const char* schemaName(Op op) { return op == Op::LogSoftmax ? SoftmaxOverride::kLogOpName : SoftmaxOverride::kOpName; }

// The plan's kernel with the last-dim ABI (in, out, rows, cols), or the
// middle-dim one (in, out, outer, dim, inner) for a key with an inner extent
// (Note [Two softmax layouts] in kernels/src/SoftmaxDescriptor.cpp).
bool launchPlan(const Plan& plan, const VariantKey& key, const void* in, void* out, void* stream) noexcept {
  if (key.inner == 0) return plan.launcher->launch(RowKernelArgs{in, out, key.rows, key.cols}, stream);
  return plan.launcher->launchArgs(KernelArgs().pointer(in).pointer(out).int64(key.rows).int64(key.cols).int64(key.inner),
                                   stream);
}

// Tries the planned kernel; an undefined tensor means "run the original".
at::Tensor tryPlan(Op op, const at::Tensor& self, int64_t dim, bool halfToFloat) noexcept {
  try {
    std::optional<VariantKey> key = softmaxVariantOf(self, dim, halfToFloat);
    if (!key) return {};
    OverrideState& s = SoftmaxOverride::state(op);
    s.noteDeviceUse(key->device);
    const Plan* plan = s.plans.load()->find(*key);
    if (!plan) return {};
    const size_t align = plan->launcher->alignment();
    if (reinterpret_cast<uintptr_t>(self.const_data_ptr()) % align != 0) return {};
    at::Tensor out = at::empty(self.sizes(), self.options());
    if (reinterpret_cast<uintptr_t>(out.const_data_ptr()) % align != 0) return {};
    void* stream = nullptr;
    if (self.is_cuda()) stream = c10::cuda::getCurrentCUDAStream(self.device().index()).stream();
    if (!launchPlan(*plan, *key, self.const_data_ptr(), out.mutable_data_ptr(), stream)) return {};
    return out;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "softmax-trampoline-error")
        << "error in the _softmax trampoline, using the ATen kernel: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "softmax-trampoline-error") << "unknown error in the _softmax trampoline; using ATen";
  }
  return {};
}

template <Op kOp>
at::Tensor trampoline(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim, bool halfToFloat) {
  OverrideState& s = SoftmaxOverride::state(kOp);
  if (servingEnabled()) {
    at::Tensor out = tryPlan(kOp, self, dim, halfToFloat);
    if (out.defined()) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return out;
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return SoftmaxOverride::callOriginal(ks, self, dim, halfToFloat, kOp);
}

}  // namespace

std::optional<VariantKey> softmaxVariantOf(const at::Tensor& self, int64_t dim, bool halfToFloat) {
  if (halfToFloat || !self.defined() || self.dim() < 1) return std::nullopt;
  if (!self.is_contiguous() || self.numel() == 0) return std::nullopt;
  std::optional<kernels::DType> code = familyDTypeOf(self.scalar_type());
  if (!code) return std::nullopt;
  kernels::SoftmaxLayout layout;
  if (!kernels::softmaxLayoutOf(self.sizes().data(), self.dim(), dim, &layout)) return std::nullopt;
  VariantKey k;
  k.dtype = static_cast<int32_t>(*code);
  k.device = self.is_cpu() ? -1 : self.device().index();
  // The last dim (or one followed only by sizes of 1) folds the rest into rows;
  // any other dim is [outer, dim, inner] (Note [Two softmax layouts]).
  k.rows = layout.outer;
  k.cols = layout.dim;
  k.inner = layout.inner == 1 ? 0 : layout.inner;
  return k;
}

OverrideState& SoftmaxOverride::state(Op op) {
  // Leaked on purpose: the dispatcher may call the trampoline during exit.
  static OverrideState* states[2] = {new OverrideState(), new OverrideState()};
  return *states[static_cast<size_t>(op)];
}

std::optional<VariantKey> SoftmaxOverride::recordedKey(const at::RecordFunction& call) {
  if (call.num_inputs() < 3) return std::nullopt;
  auto inputs = call.inputs();
  if (!inputs[0].isTensor() || !inputs[1].isInt() || !inputs[2].isBool()) return std::nullopt;
  return softmaxVariantOf(inputs[0].toTensor(), inputs[1].toInt(), inputs[2].toBool());
}

at::Tensor SoftmaxOverride::callOriginal(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim,
                                         bool halfToFloat, Op op) {
  OverrideState& s = state(op);
  const c10::DispatchKey key = installedKeyOf(ks, s.installed);
  if (key == c10::DispatchKey::CUDA) {
    return op == Op::LogSoftmax ? at::cuda::_log_softmax(self, dim, halfToFloat)
                                : at::cuda::_softmax(self, dim, halfToFloat);
  }
  const auto& original = s.originals[static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value() && s.op.has_value(), "hotkernel: no original ", schemaName(op), " kernel for ",
              c10::toString(key));
  torch::jit::Stack stack{self, dim, halfToFloat};
  original->callBoxed(*s.op, ks, &stack);
  return std::move(stack[0]).toTensor();
}

void SoftmaxOverride::install(c10::DispatchKey key, Op op) {
  state(op).installOnce(key, schemaName(op), [op](torch::Library& lib) {
    if (op == Op::LogSoftmax) {
      lib.impl("_log_softmax", TORCH_FN(trampoline<Op::LogSoftmax>));
    } else {
      lib.impl("_softmax", TORCH_FN(trampoline<Op::Softmax>));
    }
  });
}

}  // namespace hotkernel
