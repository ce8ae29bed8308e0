#include "hotkernel/optimizer/PlanFactory.h"

#include <sstream>

#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"

namespace hotkernel {

using kernels::DType;
using kernels::SoftmaxFamily;

namespace {

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
  const kernels::LaunchGeometry g = Family::launchGeometry(v, params);
  Plan plan;
  plan.key = key;
  plan.description = familyName + "[" + params.describe() + "] for " + variantString(key);
  plan.launcher = CudaKernelLauncher::load(device, cubin, Family::kKernelName,
                                           LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                                           Family::requiredAlignment(v.dtype, params), plan.description);
  return plan;
}

}  // namespace

Plan makeSoftmaxPlan(const VariantKey& key, const kernels::SoftmaxParams& params, const std::string& cubin,
                     int device, kernels::SoftmaxOp op) {
  const kernels::SoftmaxVariant v{static_cast<DType>(key.dtype), key.rows, key.cols};
  return familyPlan<SoftmaxFamily>(key, v, params, cubin, device, kernels::softmaxFamilyName(op));
}

Plan makeRmsNormPlan(const VariantKey& key, const kernels::NormParams& params, const std::string& cubin,
                     int device) {
  HOTKERNEL_CHECK(!key.hasBias(), "rms_norm takes no bias: ", variantString(key));
  const kernels::RmsNormVariant v{static_cast<DType>(key.dtype), key.rows, key.cols, key.hasWeight()};
  return familyPlan<kernels::RmsNormFamily>(key, v, params, cubin, device, kernels::RmsNormFamily::kName);
}

Plan makeLayerNormPlan(const VariantKey& key, const kernels::NormParams& params, const std::string& cubin,
                       int device) {
  const kernels::LayerNormVariant v{static_cast<DType>(key.dtype), key.rows, key.cols, key.hasWeight(),
                                    key.hasBias()};
  return familyPlan<kernels::LayerNormFamily>(key, v, params, cubin, device, kernels::LayerNormFamily::kName);
}

Plan makeCrossEntropyPlan(const VariantKey& key, const kernels::CrossEntropyParams& params, const std::string& cubin,
                          int device) {
  using kernels::CrossEntropyFamily;
  HOTKERNEL_CHECK(key.reduction() >= 0 && !key.hasWeight() && !key.hasBias(),
                  "not a cross_entropy_loss key: ", variantString(key));
  const kernels::CrossEntropyVariant v{static_cast<DType>(key.dtype), key.rows, key.cols,
                                       static_cast<kernels::CrossEntropyReduction>(key.reduction())};
  return familyPlan<CrossEntropyFamily>(key, v, params, cubin, device, CrossEntropyFamily::kName);
}

Plan makeReducePlan(const VariantKey& key, const kernels::ReduceParams& params, const std::string& cubin, int device,
                    kernels::ReduceOp op) {
  HOTKERNEL_CHECK(key.flags == 0, "a reduction key has no flags: ", variantString(key));
  const kernels::ReduceVariant v{static_cast<DType>(key.dtype), key.rows, key.cols, op};
  return familyPlan<kernels::ReduceFamily>(key, v, params, cubin, device, kernels::reduceFamilyName(op));
}

Plan makePlan(const std::string& family, const VariantKey& key, const nlohmann::json& params,
              const std::string& kernelName, const std::string& cubin, int device) {
  for (kernels::SoftmaxOp op : {kernels::SoftmaxOp::Softmax, kernels::SoftmaxOp::LogSoftmax}) {
    if (family != kernels::softmaxFamilyName(op)) continue;
    HOTKERNEL_CHECK(kernelName.empty() || kernelName == SoftmaxFamily::kKernelName, "unexpected kernel name ",
                    kernelName);
    return makeSoftmaxPlan(key, kernels::SoftmaxParams::fromJson(params), cubin, device, op);
  }
  if (family == kernels::RmsNormFamily::kName) {
    HOTKERNEL_CHECK(kernelName.empty() || kernelName == kernels::RmsNormFamily::kKernelName,
                    "unexpected kernel name ", kernelName);
    return makeRmsNormPlan(key, kernels::NormParams::fromJson(params), cubin, device);
  }
  if (family == kernels::LayerNormFamily::kName) {
    HOTKERNEL_CHECK(kernelName.empty() || kernelName == kernels::LayerNormFamily::kKernelName,
                    "unexpected kernel name ", kernelName);
    return makeLayerNormPlan(key, kernels::NormParams::fromJson(params), cubin, device);
  }
  if (family == kernels::CrossEntropyFamily::kName) {
    HOTKERNEL_CHECK(kernelName.empty() || kernelName == kernels::CrossEntropyFamily::kKernelName,
                    "unexpected kernel name ", kernelName);
    return makeCrossEntropyPlan(key, kernels::CrossEntropyParams::fromJson(params), cubin, device);
  }
  if (const std::optional<kernels::ReduceOp> op = kernels::reduceOpOfFamily(family)) {
    HOTKERNEL_CHECK(kernelName.empty() || kernelName == kernels::ReduceFamily::kKernelName, "unexpected kernel name ",
                    kernelName);
    return makeReducePlan(key, kernels::ReduceParams::fromJson(params), cubin, device, *op);
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
         ";rows=" + std::to_string(key.rows) + ";cols=" + std::to_string(key.cols) +
         (key.hasWeight() ? ";weight=1" : "") + (key.hasBias() ? ";bias=1" : "") +
         (key.reduction() >= 0
              ? std::string(";reduction=") +
                    kernels::reductionName(static_cast<kernels::CrossEntropyReduction>(key.reduction()))
              : std::string());
}

std::optional<VariantKey> parseVariantString(const std::string& s, int device) {
  VariantKey k;
  k.device = device;
  bool haveDtype = false, haveRows = false, haveCols = false;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ';')) {
    const auto eq = part.find('=');
    if (eq == std::string::npos) return std::nullopt;
    const std::string name = part.substr(0, eq), value = part.substr(eq + 1);
    try {
      if (name == "dtype") {
        k.dtype = static_cast<int32_t>(kernels::parseDType(value));
        haveDtype = true;
      } else if (name == "rows") {
        k.rows = std::stoll(value);
        haveRows = true;
      } else if (name == "cols") {
        k.cols = std::stoll(value);
        haveCols = true;
      } else if (name == "reduction") {
        int32_t r = -1;
        for (auto red : {kernels::CrossEntropyReduction::None, kernels::CrossEntropyReduction::Mean,
                         kernels::CrossEntropyReduction::Sum}) {
          if (value == kernels::reductionName(red)) r = static_cast<int32_t>(red);
        }
        if (r < 0) return std::nullopt;
        k.flags = (k.flags & ~VariantKey::kReductionMask) | VariantKey::reductionFlags(r);
      } else if (name == "weight" || name == "bias") {
        if (value != "0" && value != "1") return std::nullopt;
        if (value == "1") k.flags |= name == "weight" ? VariantKey::kHasWeight : VariantKey::kHasBias;
      }
    } catch (...) {
      return std::nullopt;
    }
  }
  if (!(haveDtype && haveRows && haveCols) || k.rows < 1 || k.cols < 1) return std::nullopt;
  return k;
}

}  // namespace hotkernel
