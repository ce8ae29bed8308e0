#pragma once
// Turns a validated (variant, parameter point, cubin) into a Plan that the
// dispatcher trampoline can run: loads the cubin on the device and fixes the
// launch geometry for the variant.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/NormCommon.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// Throws Error if the cubin cannot be loaded or the parameters do not fit the
// variant. `op` only names the plan: the cubin was compiled for it (HK_LOG).
Plan makeSoftmaxPlan(const VariantKey& key, const kernels::SoftmaxParams& params, const std::string& cubin,
                     int device, kernels::SoftmaxOp op = kernels::SoftmaxOp::Softmax);

// The norm families: the key's flags say whether the call passes a weight
// (and a bias); `cubin` must have been compiled with the same HK_HAS_* defines.
// The plan's launcher runs the family's ABI through launchArgs() (Note [Kernel
// argument lists]); its alignment() is what in, out, weight and bias need.
Plan makeRmsNormPlan(const VariantKey& key, const kernels::NormParams& params, const std::string& cubin,
                     int device);
Plan makeLayerNormPlan(const VariantKey& key, const kernels::NormParams& params, const std::string& cubin,
                       int device);

// cross_entropy_loss: the key's flags hold the reduction (VariantKey::reductionFlags);
// `cubin` must have been compiled for it. The launcher's alignment() is what
// the logits need (target: 8 bytes, out: one element, work: 4 bytes); a
// launch's workspace comes from StreamWorkspaces (its counter already 0).
Plan makeCrossEntropyPlan(const VariantKey& key, const kernels::CrossEntropyParams& params, const std::string& cubin,
                          int device);

// The last-dim reductions (sum, mean, amax, argmax over dim -1): the key has
// no flags; `cubin` must have been compiled for `op`. The launcher runs the
// (in, out, rows, cols) ABI; its alignment() is what the input needs (the
// output: one element of its type, ReduceFamily::outputElementSize).
Plan makeReducePlan(const VariantKey& key, const kernels::ReduceParams& params, const std::string& cubin, int device,
                    kernels::ReduceOp op);

// A plan for a cache entry of any family: "softmax_lastdim" and
// "log_softmax_lastdim" (params = a SoftmaxParams point), "rms_norm" and "layer_norm" (params = a NormParams
// point), "cross_entropy" (params = a CrossEntropyParams point), "sum_lastdim", "mean_lastdim",
// "amax_lastdim" and "argmax_lastdim" (params = a ReduceParams point) or "agent"
// (params = {"launch": AgentLaunch}, kernel `kernelName`
// from an external agent). Throws Error for an unknown family or malformed params.
Plan makePlan(const std::string& family, const VariantKey& key, const nlohmann::json& params,
              const std::string& kernelName, const std::string& cubin, int device);

// The cache's variant string for a key: "dtype=bfloat16;rows=4096;cols=32000" (no device:
// the fingerprint names the GPU model), then ";weight=1" and ";bias=1" for the
// flags that are set (norm ops), ";reduction=none|mean|sum" for cross_entropy_loss keys.
std::string variantString(const VariantKey& key);

// The inverse of variantString for `device`; nullopt for a malformed string.
std::optional<VariantKey> parseVariantString(const std::string& variant, int device);

}  // namespace hotkernel
