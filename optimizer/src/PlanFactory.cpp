#include "hotkernel/optimizer/PlanFactory.h"

#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"

namespace hotkernel {

using kernels::DType;
using kernels::SoftmaxFamily;

Plan makeSoftmaxPlan(const VariantKey& key, const kernels::SoftmaxParams& params, const std::string& cubin,
                     int device) {
  const kernels::SoftmaxVariant v{static_cast<DType>(key.dtype), key.rows, key.cols};
  HOTKERNEL_CHECK(SoftmaxFamily::guardVariant(v) && SoftmaxFamily::guardParams(v, params),
                  "parameters ", params.describe(), " do not fit ", variantString(key));
  const kernels::LaunchGeometry g = SoftmaxFamily::launchGeometry(v, params);
  Plan plan;
  plan.key = key;
  plan.description = std::string(SoftmaxFamily::kName) + "[" + params.describe() + "] for " + variantString(key);
  plan.launcher = CudaKernelLauncher::load(device, cubin, SoftmaxFamily::kKernelName,
                                           LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                                           static_cast<size_t>(params.vec) * kernels::elementSize(v.dtype),
                                           plan.description);
  return plan;
}

Plan makePlan(const std::string& family, const VariantKey& key, const nlohmann::json& params,
              const std::string& kernelName, const std::string& cubin, int device) {
  if (family == SoftmaxFamily::kName) {
    HOTKERNEL_CHECK(kernelName.empty() || kernelName == SoftmaxFamily::kKernelName, "unexpected kernel name ",
                    kernelName);
    return makeSoftmaxPlan(key, kernels::SoftmaxParams::fromJson(params), cubin, device);
  }
  HOTKERNEL_CHECK(family == "agent", "unknown kernel family '", family, "'");
  HOTKERNEL_CHECK(params.is_object() && params.contains("launch"), "agent params without a launch");
  const AgentLaunch launch = AgentLaunch::fromJson(params["launch"]);
  const kernels::LaunchGeometry g = launch.geometry(key.rows);
  Plan plan;
  plan.key = key;
  plan.description = "agent[" + kernelName + " " + params["launch"].dump() + "] for " + variantString(key);
  // Agent kernels promise to handle 16-byte aligned, non-overlapping buffers (tools/agent/PROTOCOL.md).
  plan.launcher = CudaKernelLauncher::load(device, cubin, kernelName, LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                                           16, plan.description);
  return plan;
}

std::string variantString(const VariantKey& key) {
  return "dtype=" + std::string(kernels::dtypeName(static_cast<DType>(key.dtype))) +
         ";rows=" + std::to_string(key.rows) + ";cols=" + std::to_string(key.cols);
}

}  // namespace hotkernel
