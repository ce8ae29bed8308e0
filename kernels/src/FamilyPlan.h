#pragma once
// How every family's descriptor makes its plan (FamilyDescriptor::makePlan).

#include <string>

#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel::kernels::detail {

// Note [A family's plan]
// Every family's plan is made the same way: the variant must pass the family's
// guards with these parameters (a cache entry that no longer fits is refused
// here, before any module is loaded), then the cubin is loaded with the
// family's launch geometry for the variant and its required alignment.
template <typename Family, typename Variant, typename Params>
Plan familyPlan(const VariantKey& key, const Variant& v, const Params& params, const std::string& cubin, int device,
                const std::string& familyName) {
  HOTKERNEL_CHECK(Family::guardVariant(v) && Family::guardParams(v, params), "parameters ", params.describe(),
                  " do not fit ", familyName, " ", variantString(key));
  const auto g = Family::launchGeometry(v, params);
  Plan plan;
  plan.key = key;
  plan.description = familyName + "[" + params.describe() + "] for " + variantString(key);
  plan.launcher = CudaKernelLauncher::load(device, cubin, Family::kKernelName,
                                           ::hotkernel::LaunchGeometry{g.gridX, g.blockX, g.sharedBytes, g.cooperative},
                                           Family::requiredAlignment(v.dtype, params), plan.description);
  return plan;
}

// Whether `key` carries only option bits within `allowed`.
inline bool optionsWithin(const VariantKey& key, int32_t allowed) { return (key.options & ~allowed) == 0; }

}  // namespace hotkernel::kernels::detail
