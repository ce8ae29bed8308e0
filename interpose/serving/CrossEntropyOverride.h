#pragma once
// The dispatcher trampolines for aten::cross_entropy_loss(self, labels,
// weight?, reduction, ignore_index, label_smoothing), a composite op
// (CompositeImplicitAutograd: log_softmax, then nll_loss).
//
// Note [Overriding a composite op]
// A composite op has no backend kernel, so the override registers two
// trampolines per backend (DESIGN.md):
//  - the backend key (CUDA; CPU in the tests): the fast path. Reached directly
//    under inference_mode (no autograd keys) and from the autograd trampoline.
//    A call the family serves (CrossEntropyFamily::guardCall, before anything
//    else) whose variant has a plan runs the kernel; anything else, and any
//    doubt (misaligned data, a failed launch, an exception), runs the original:
//    at::compositeimplicitautograd::cross_entropy_loss.
//  - the autograd key (AutogradCUDA; AutogradCPU): when a gradient is needed
//    (grad mode on and an input requiring grad, or a forward-mode tangent), the
//    original composite, whose log_softmax and nll_loss record autograd as
//    always; otherwise a redispatch below autograd, to the backend trampoline.
// Registering only the autograd key would miss inference_mode; registering
// only the backend key would break autograd: once a backend has a direct
// kernel, the dispatcher no longer uses the composite kernel for its autograd
// key. install() therefore registers the autograd key first, then the
// backend key. Nothing thrown here reaches the caller except the original's
// own errors.

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/SymInt.h>

#include <optional>

#include "OverrideState.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// The plan-table key of a cross_entropy_loss call hotkernel can serve, or
// nullopt (CrossEntropyFamily::guardCall refuses it: class weights, label
// smoothing, probability or non-int64 labels, logits that are not 2-D
// contiguous float32/float16/bfloat16, a label that is not a contiguous
// [rows] on the logits' device, an unknown reduction, sizes out of range).
// Device is -1 for CPU tensors; flags hold the reduction (VariantKey::reductionFlags).
std::optional<VariantKey> crossEntropyKeyOf(const at::Tensor& self, const at::Tensor& labels,
                                            const std::optional<at::Tensor>& weight, int64_t reduction,
                                            double labelSmoothing);

// Whether a call needs autograd: grad mode on and self, labels or weight
// requiring grad, or any of them carrying a forward-mode tangent.
bool crossEntropyNeedsGrad(const at::Tensor& self, const at::Tensor& labels, const std::optional<at::Tensor>& weight);

class CrossEntropyOverride {
 public:
  static constexpr const char* kOpName = "aten::cross_entropy_loss";

  // Registers the trampolines for a backend key (CUDA; CPU in tests): its
  // autograd key first, then the key itself (Note [Overriding a composite
  // op]). Idempotent; throws Error if the op cannot be found.
  // The state of the trampoline (its row in the served-op table).
  static OverrideState& state();
  // The key of a sampled call, as the trampoline keys it (nullopt: one it never serves).
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call);

  static void install(c10::DispatchKey backendKey);


  // The original: at::compositeimplicitautograd::cross_entropy_loss.
  static at::Tensor callOriginal(const at::Tensor& self, const at::Tensor& labels,
                                 const std::optional<at::Tensor>& weight, int64_t reduction, c10::SymInt ignoreIndex,
                                 double labelSmoothing);

  // Calls served by a plan / by the original (backend trampoline only).
};

}  // namespace hotkernel
