// The descriptor of rms_norm (Note [Family descriptors]): keys carry the weight option.
#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/RmsNormFamily.h"

namespace hotkernel::kernels {
namespace {

constexpr int32_t kFields = variant_options::kWeight;

bool servesKey(const VariantKey& key) {
  return detail::optionsWithin(key, kFields) && key.inner == 0 && !key.hasMore() &&
         RmsNormFamily::guardVariant(rmsNormVariantOf(key));
}
double bytesMoved(const VariantKey& key) { return RmsNormFamily::bytesMoved(rmsNormVariantOf(key)); }

Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(detail::optionsWithin(key, kFields), "rms_norm takes no bias: ", variantString(key));
  const RmsNormVariant v = rmsNormVariantOf(key);
  const NormParams p = NormParams::fromJson(params);
  Plan plan = detail::familyPlan<RmsNormFamily>(key, v, p, cubin, device, RmsNormFamily::kName);
  plan.workspaceFloats = RmsNormFamily::workspaceFloats(v, p);
  return plan;
}

const FamilyDescriptor kRmsNorm{RmsNormFamily::kName, "aten::_fused_rms_norm", RmsNormFamily::kKernelName, kFields,
                                &servesKey, &bytesMoved, &makePlan};

}  // namespace

RmsNormVariant rmsNormVariantOf(const VariantKey& key) {
  return RmsNormVariant{static_cast<DType>(key.dtype), key.rows, key.cols, hasWeight(key)};
}

const FamilyDescriptor& rmsNormDescriptor() { return kRmsNorm; }

}  // namespace hotkernel::kernels
