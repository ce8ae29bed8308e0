#pragma once
// The dispatcher trampolines for aten::scaled_dot_product_attention(query,
// key, value, attn_mask?, dropout_p, is_causal, scale?, enable_gqa), a
// composite op (CompositeImplicitAutograd): the variant's chosen backend
// (Note [Choosing an attention backend] in kernels/src/SdpaFamily.cpp) is
// called directly, instead of the one PyTorch's heuristic picks. Registered
// like cross_entropy_loss (Note [Overriding a composite op] in
// CrossEntropyOverride.h): the autograd key first (a call that needs a
// gradient runs the composite; otherwise below autograd), then the backend
// key (a served call with a published choice runs that backend; anything else,
// and any doubt, runs the composite).

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKey.h>

#include <optional>

#include "OverrideState.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// The plan-table key of a call the attention family serves, or nullopt
// (SdpaFamily::guardCall refuses it: a mask, dropout, layouts of no class,
// mixed dtypes or devices, nested tensors, ...). Device is -1 for CPU tensors.
std::optional<VariantKey> sdpaKeyOf(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                    const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                                    bool enableGqa);

// Whether a call needs autograd: grad mode on and an input requiring grad, or
// a forward-mode tangent on one.
bool sdpaNeedsGrad(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                   const std::optional<at::Tensor>& attnMask);

class SdpaOverride {
 public:
  static constexpr const char* kOpName = "aten::scaled_dot_product_attention";

  // The state of the trampoline (its row in the served-op table).
  static OverrideState& state();
  // The key of a sampled call, as the trampoline keys it (nullopt: one it never serves).
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call);
  // Registers the trampolines for a backend key (CUDA; CPU in tests): its
  // autograd key first, then the key itself. Idempotent; throws Error if the
  // op cannot be found.
  static void install(c10::DispatchKey backendKey);
  // The original: at::compositeimplicitautograd::scaled_dot_product_attention.
  static at::Tensor callOriginal(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                 const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                                 std::optional<double> scale, bool enableGqa);
};

}  // namespace hotkernel
