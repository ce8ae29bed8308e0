#pragma once
// Turns a stored (family, variant, parameter point, cubin) into a Plan that the
// dispatcher trampoline can run: a family's entry through its descriptor
// (kernels::FamilyDescriptor::makePlan), an external agent's entry through its
// launch description.

#include <nlohmann/json.hpp>

#include <string>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// A plan for a cache entry of any family: a family name of kernels::allFamilies()
// (params = that family's Params point for the key's layout, kernel name
// empty or the family's for the key: kernels::kernelNameFor) or "agent"
// (params = {"launch": AgentLaunch}, kernel `kernelName` from an external
// agent; two-extent keys only). Throws Error for an unknown family, a key the
// family does not serve (FamilyDescriptor::servesKey), a kernel name that is
// not the family's, malformed params, or a cubin that does not load.
Plan makePlan(const std::string& family, const VariantKey& key, const nlohmann::json& params,
              const std::string& kernelName, const std::string& cubin, int device);

}  // namespace hotkernel
