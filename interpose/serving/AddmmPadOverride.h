#pragma once
// The dispatcher trampoline for aten::addmm(bias, mat1, mat2, beta, alpha)
// served by the addmm_pad_n family (kernels/MmPadFamily.h, Note [Padded
// GEMMs]): F.linear with a bias, i.e. a float16 / bfloat16 mat1 [M, K]
// contiguous times mat2 = w.t() of a contiguous weight [N, K], plus a
// contiguous bias [N], N not a multiple of 8, runs as a GEMM padded to N8 (the
// weight and the bias padded by hk_pad_rows, ATen's own addmm with the call's
// beta and alpha, hk_pad_rows again into a contiguous [M, N]). Everything else
// and any doubt runs the original kernel (at::cuda::addmm on CUDA, the
// captured SafeKernelFunction on other keys); nothing thrown here reaches the
// caller except the original kernel's own errors.

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/Scalar.h>

#include <optional>

#include "OverrideState.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

class AddmmPadOverride {
 public:
  static constexpr const char* kOpName = "aten::addmm";

  // The state of the trampoline (its row in the served-op table).
  static OverrideState& state();
  // Registers the trampoline for `key`. Idempotent per key; throws Error if
  // the op or its kernel for `key` cannot be found.
  static void install(c10::DispatchKey key);
  // The key of a call, as the trampoline keys it (nullopt: one the family never serves).
  static std::optional<VariantKey> keyOf(const at::Tensor& bias, const at::Tensor& mat1, const at::Tensor& mat2);
  // The key of a sampled call (aten::addmm's inputs bias, mat1, mat2, ...).
  static std::optional<VariantKey> recordedKey(const at::RecordFunction& call);
  // The original kernel for the backend of `ks`, never the padded plan.
  static at::Tensor callOriginal(c10::DispatchKeySet ks, const at::Tensor& bias, const at::Tensor& mat1,
                                 const at::Tensor& mat2, const at::Scalar& beta, const at::Scalar& alpha);
};

}  // namespace hotkernel
