#pragma once
// Turns a validated (variant, parameter point, cubin) into a Plan that the
// dispatcher trampoline can run: loads the cubin on the device and fixes the
// launch geometry for the variant.

#include <nlohmann/json.hpp>

#include <string>

#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// Throws Error if the cubin cannot be loaded or the parameters do not fit the variant.
Plan makeSoftmaxPlan(const VariantKey& key, const kernels::SoftmaxParams& params, const std::string& cubin,
                     int device);

// A plan for a cache entry of any family: "softmax_lastdim" (params = a
// SoftmaxParams point) or "agent" (params = {"launch": AgentLaunch}, kernel
// `kernelName` from an external agent). Throws Error for an unknown family or
// malformed params.
Plan makePlan(const std::string& family, const VariantKey& key, const nlohmann::json& params,
              const std::string& kernelName, const std::string& cubin, int device);

// The cache's variant string for a key: "dtype=bfloat16;rows=4096;cols=32000" (no device:
// the fingerprint names the GPU model).
std::string variantString(const VariantKey& key);

}  // namespace hotkernel
