#pragma once
// The dispatcher trampolines for the reductions: aten::sum.dim_IntList,
// aten::mean.dim, aten::amax, aten::argmax, aten::amin, aten::argmin,
// aten::max.dim and aten::min.dim, leaf ops with CUDA kernels (autograd stays above them: the trampoline replaces
// only the CUDA kernel, as the _softmax one does). One stateless trampoline
// per op and key (Note [One stateless trampoline per op] in
// SoftmaxOverride.h), one plan table per op. A call the family serves
// (ReduceFamily::guardCall: the last dim, or the last k dims for sum, mean,
// amax and amin; ReduceDimFamily::guardCall: one dim that is not the last;
// contiguous float32 / float16 / bfloat16; sum / mean without dtype=;
// argmax / argmin / max.dim / min.dim with a dim) whose variant has a plan
// runs the kernel and returns what ATen's kernel returns: the input's dtype
// (int64 for argmax / argmin; max.dim / min.dim: values in the input's dtype
// and int64 indices), shape the input's without the reduced dims (ones in
// their place with keepdim), contiguous. The out= and named-dim overloads of
// max / min have no trampoline: ATen runs them.
// Anything else, and any doubt (misaligned data, a failed launch, an
// exception), runs the original: at::cuda::<op> on CUDA, the captured
// SafeKernelFunction on other keys. Nothing thrown here reaches the caller
// except the original's own errors.
//
// Note [Reductions are everywhere]
// aten::sum and friends are called by much of PyTorch (losses, other ops'
// backward, the harness's own checks). The trampoline's refusal path is a
// few comparisons and one small vector (the call's sizes): calls it refuses
// (full reductions, several dims but the last ones, a middle dim of a
// non-contiguous tensor, other dtypes) pay that and the original's unboxed
// call. The references the harness and the tuner compare against call
// at::cuda::<op> directly, never the trampoline.

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/ScalarType.h>
#include <c10/util/OptionalArrayRef.h>

#include <optional>
#include <tuple>
#include <vector>

#include "hotkernel/kernels/ReduceFamily.h"
#include "OverrideState.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// A reduction call hotkernel can serve: its plan-table key (no flags; an
// inner extent for a middle dim) and the result's sizes.
struct ReduceCallKey {
  VariantKey key;
  std::vector<int64_t> outSizes;
};

// The key of a call of `op` (`dims`: the dim list, nullopt for None; argmax
// and argmin pass {dim} or nullopt; `dtypeGiven`: sum / mean's dtype= argument), or
// nullopt when ReduceFamily::guardCall and ReduceDimFamily::guardCall refuse
// it. Device is -1 for CPU tensors.
// Allocates nothing but the result's outSizes after a thread's first call.
std::optional<ReduceCallKey> reduceKeyOf(kernels::ReduceOp op, const at::Tensor& self,
                                         std::optional<at::IntArrayRef> dims, bool keepdim, bool dtypeGiven);

class ReduceOverride {
 public:
  // The dispatcher name with overload (the cache's, the profile's and
  // HOTKERNEL_OPS' spelling): kernels::reduceAtenOpName.
  static const char* opName(kernels::ReduceOp op);

  // Registers the op's trampoline for `key`. Idempotent per (op, key);
  // throws Error if the op or its kernel for `key` cannot be found.
  static void install(c10::DispatchKey key, kernels::ReduceOp op);
  // The state of `op`'s trampoline (its row in the served-op table).
  static OverrideState& state(kernels::ReduceOp op);
  // The key of a sampled call of `op` (Note [Recording reductions]); nullopt: another overload, or not served.
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call, kernels::ReduceOp op);


  // The originals for the backend of `ks`, never a hotkernel kernel.
  static at::Tensor callOriginalSum(c10::DispatchKeySet ks, const at::Tensor& self, at::OptionalIntArrayRef dim,
                                    bool keepdim, std::optional<at::ScalarType> dtype);
  static at::Tensor callOriginalMean(c10::DispatchKeySet ks, const at::Tensor& self, at::OptionalIntArrayRef dim,
                                     bool keepdim, std::optional<at::ScalarType> dtype);
  // amax or amin.
  static at::Tensor callOriginalExtremum(kernels::ReduceOp op, c10::DispatchKeySet ks, const at::Tensor& self,
                                         at::IntArrayRef dim, bool keepdim);
  // argmax or argmin.
  static at::Tensor callOriginalIndex(kernels::ReduceOp op, c10::DispatchKeySet ks, const at::Tensor& self,
                                      std::optional<int64_t> dim, bool keepdim);
  // max.dim or min.dim: (values, indices).
  static std::tuple<at::Tensor, at::Tensor> callOriginalPair(kernels::ReduceOp op, c10::DispatchKeySet ks,
                                                             const at::Tensor& self, int64_t dim, bool keepdim);

};

}  // namespace hotkernel
