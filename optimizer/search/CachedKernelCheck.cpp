#include "hotkernel/optimizer/CachedKernelCheck.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/FamilyTuning.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

constexpr const char* kInterrupted = "tuning interrupted";

bool interrupted(const std::exception& e) { return std::string(e.what()).find(kInterrupted) != std::string::npos; }

// The spot check (Note [Cached kernels checked before first use]): the plan called once on each timed input.
std::string spotCheck(const FamilyTuneSpec& spec, const Plan& plan, int device,
                      const std::function<bool()>& yieldPoint) {
  const RowOpSpec general = generalForm(spec.harnessSpec);
  for (size_t i = 0; i < spec.timedInputs.size(); ++i) {
    if (yieldPoint) HOTKERNEL_CHECK(yieldPoint(), kInterrupted);
    const TimedInput& input = spec.timedInputs[i];
    const std::vector<at::Tensor> outs = allocateOutputs(general, input.in);
    const bool launched =
        spec.planCall ? spec.planCall(plan, input, outs)
                      : plan.launcher->launchArgs(general.kernelArgs(input.in, input.args, outs),
                                                  at::cuda::getCurrentCUDAStream(device).stream());
    if (!launched) return "spot check: the plan failed to launch on input " + std::to_string(i);
    const std::string why = checkOutputs(general, spec.dtype, input.in, input.args, outs, yieldPoint);
    HOTKERNEL_CHECK(why != "interrupted", kInterrupted);
    if (!why.empty()) return "spot check against ATen on input " + std::to_string(i) + ": " + why;
  }
  return "";
}

}  // namespace

std::string checkCachedKernel(const kernels::FamilyDescriptor& family, const VariantKey& key,
                              const std::string& paramsJson, const std::string& cubin, const TunerOptions& options) {
  if (key.device < 0) return "a cached kernel serves only CUDA variants";
  if (!family.servesKey(key)) return std::string(family.name) + " does not serve " + kernels::variantString(key);
  nlohmann::json params;
  try {
    params = nlohmann::json::parse(paramsJson);
  } catch (const std::exception& e) {
    return std::string("unreadable parameters: ") + e.what();
  }
  if (const OwnCachedCheck own = ownCachedCheckOf(family)) {
    try {
      return own(key, paramsJson, cubin, options);
    } catch (const std::exception& e) {
      if (interrupted(e)) throw;
      return std::string("cannot be checked: ") + e.what();
    }
  }
  const int device = key.device;
  TunerScope scope(device);  // Note [A tuner's scope]
  try {
    const FamilyTuneSpec spec = familyTuneSpecOf(family, key, options);
    const auto point = std::find_if(spec.validPoints.begin(), spec.validPoints.end(),
                                    [&](const FamilyPoint& p) { return spec.paramsJson(p) == params; });
    if (point == spec.validPoints.end()) {
      return "its parameters " + params.dump() + " are not a point of " + spec.family + "'s space for this variant";
    }
    HarnessOptions ho;
    ho.yieldPoint = options.yieldPoint;
    const HarnessReport h =
        runHarness(spec.harnessSpec, spec.candidate(*point, cubin), spec.dtype, spec.harnessRowCount(), spec.cols,
                   device, ho);
    if (!h.passed) {
      HOTKERNEL_CHECK(h.failure()->detail != "interrupted", kInterrupted);
      return std::string(toString(h.failure()->stage)) + " stage: " + h.failure()->detail;
    }
    return spotCheck(spec, spec.makePlan(*point, cubin), device, options.yieldPoint);
  } catch (const std::exception& e) {
    if (interrupted(e)) throw;
    return std::string("cannot be checked: ") + e.what();
  }
}

}  // namespace hotkernel
