#pragma once
// The dispatcher trampolines for aten::_softmax and aten::_log_softmax (one
// family template, HK_LOG; one trampoline and one override state per op;
// Note [One stateless trampoline per op] in OverrideState.h).

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>

#include <optional>

#include "OverrideState.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

class SoftmaxOverride {
 public:
  using Op = kernels::SoftmaxOp;
  static constexpr const char* kOpName = "aten::_softmax";
  static constexpr const char* kLogOpName = "aten::_log_softmax";
  // Registers the trampoline of `op` for `key`. Idempotent per (op, key);
  // throws Error if the op or its kernel for `key` cannot be found.
  static void install(c10::DispatchKey key, Op op = Op::Softmax);

  // The state of `op`'s trampoline (its row in the served-op table).
  static OverrideState& state(Op op = Op::Softmax);
  // The key of a sampled call of either op (self, dim, half_to_float), as the trampoline keys it.
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call);

  // The original kernel of `op` for the backend of `ks`, never a hotkernel kernel.
  static at::Tensor callOriginal(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim, bool halfToFloat,
                                 Op op = Op::Softmax);
};

// The plan-table key of a call of either op (same arguments), or nullopt when hotkernel never serves it
// (not contiguous, half_to_float, empty, unsupported dtype, dim out of range).
// Over the last dim (or one followed only by sizes of 1): [rows, cols], inner 0;
// over any other dim: [outer, dim, inner] as rows, cols and inner >= 2
// (Note [Two softmax layouts] in kernels/src/SoftmaxDescriptor.cpp). Device is -1 for CPU tensors.
std::optional<VariantKey> softmaxVariantOf(const at::Tensor& self, int64_t dim, bool halfToFloat);

}  // namespace hotkernel
