// The descriptor of batch_norm (Note [Family descriptors], Note [Batch norm of one sample]).
#include "FamilyPlan.h"
#include "hotkernel/kernels/BatchNormFamily.h"
#include "hotkernel/kernels/FamilyDescriptor.h"

namespace hotkernel::kernels {
namespace {

bool servesKey(const VariantKey& key) {
  return key.options == 0 && key.inner == 0 && !key.hasMore() &&
         LayerNormFamily::guardVariant(layerNormVariantOf(key));
}
double bytesMoved(const VariantKey& key) { return LayerNormFamily::bytesMoved(layerNormVariantOf(key)); }

Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(servesKey(key), "not a batch_norm variant: ", variantString(key));
  const LayerNormVariant v = layerNormVariantOf(key);
  const NormParams p = NormParams::fromJson(params);
  Plan plan = detail::familyPlan<LayerNormFamily>(key, v, p, cubin, device, kBatchNormName);
  plan.workspaceFloats = LayerNormFamily::workspaceFloats(v, p);
  return plan;
}

const FamilyDescriptor kBatchNorm{kBatchNormName, "aten::native_batch_norm", LayerNormFamily::kKernelName, 0,
                                  &servesKey, &bytesMoved, &makePlan};

}  // namespace

const FamilyDescriptor& batchNormDescriptor() { return kBatchNorm; }

}  // namespace hotkernel::kernels
