#include "hotkernel/optimizer/PlanFactory.h"

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"

namespace hotkernel {

Plan makePlan(const std::string& family, const VariantKey& key, const nlohmann::json& params,
              const std::string& kernelName, const std::string& cubin, int device) {
  if (const kernels::FamilyDescriptor* f = kernels::familyNamed(family)) {
    HOTKERNEL_CHECK(f->servesKey(key), family, " does not serve the variant ", kernels::variantString(key));
    const char* expected = kernels::kernelNameFor(*f, key);
    HOTKERNEL_CHECK(kernelName.empty() || kernelName == expected, "unexpected kernel name ", kernelName, " (",
                    family, " for ", kernels::variantString(key), " runs ", expected, ")");
    return f->makePlan(key, params, cubin, device);
  }
  HOTKERNEL_CHECK(family == "agent", "unknown kernel family '", family, "'");
  // Agent kernels take the (in, out, rows, cols) ABI: two extents.
  HOTKERNEL_CHECK(key.inner == 0, "an agent kernel serves no variant with an inner extent: ", kernels::variantString(key));
  HOTKERNEL_CHECK(params.is_object() && params.contains("launch"), "agent params without a launch");
  const AgentLaunch launch = AgentLaunch::fromJson(params["launch"]);
  const kernels::LaunchGeometry g = launch.geometry(key.rows);
  Plan plan;
  plan.key = key;
  plan.description =
      "agent[" + kernelName + " " + params["launch"].dump() + "] for " + kernels::variantString(key);
  // Agent kernels promise to handle 16-byte aligned, non-overlapping buffers (tools/agent/PROTOCOL.md).
  plan.launcher = CudaKernelLauncher::load(device, cubin, kernelName, LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                                           16, plan.description);
  return plan;
}

}  // namespace hotkernel
