#pragma once
// The dispatcher trampolines for aten::_softmax and aten::_log_softmax (one
// family template, HK_LOG; one trampoline and one plan table per op).
//
// Note [One stateless trampoline per op]
// install() registers softmaxTrampoline once per dispatch key (CUDA in
// production; CPU in the tests). The trampoline itself holds no state: it
// reads the op's PlanSlot (see Note [Hot swap without re-registration]) and
// either launches the planned kernel or calls the original kernel: the unboxed
// at::cuda::_softmax on CUDA, the SafeKernelFunction captured before the
// override on any other key. Nothing it does can throw into the caller except
// the original kernel's own errors.

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>

#include <optional>

#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

class SoftmaxOverride {
 public:
  using Op = kernels::SoftmaxOp;
  static constexpr const char* kOpName = "aten::_softmax";
  static constexpr const char* kLogOpName = "aten::_log_softmax";
  // "aten::_softmax" / "aten::_log_softmax" for `op`; nullopt for any other name.
  static std::optional<Op> opOf(const std::string& name);

  // Registers the trampoline of `op` for `key`. Idempotent per (op, key);
  // throws Error if the op or its kernel for `key` cannot be found.
  static void install(c10::DispatchKey key, Op op = Op::Softmax);
  static bool installed(c10::DispatchKey key, Op op = Op::Softmax);

  static PlanSlot& plans(Op op = Op::Softmax);

  // Called on the first CUDA call per device (before the plan lookup) until it
  // returns true; the runtime loads cached kernels there. Set once at start.
  using DeviceHook = bool (*)(int device);
  static void setDeviceHook(DeviceHook hook);

  // Routes to hotkernel kernels (true) or always to the original (false); both ops.
  static bool setEnabled(bool enabled);
  static bool enabled();

  // The original kernel of `op` for the backend of `ks`, never a hotkernel kernel.
  static at::Tensor callOriginal(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim, bool halfToFloat,
                                 Op op = Op::Softmax);

  // Counts of calls of `op` served by a plan and by the original kernel (for status and tests).
  static uint64_t hits(Op op = Op::Softmax);
  static uint64_t misses(Op op = Op::Softmax);
};

// The plan-table key of a call of either op (same arguments), or nullopt when hotkernel never serves it
// (not contiguous, reduction not over the last dim, half_to_float, empty,
// unsupported dtype). Device is -1 for CPU tensors.
std::optional<VariantKey> softmaxVariantOf(const at::Tensor& self, int64_t dim, bool halfToFloat);

}  // namespace hotkernel
