// The descriptor of layer_norm (Note [Family descriptors]): keys carry the weight and bias options.
#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/LayerNormFamily.h"

namespace hotkernel::kernels {
namespace {

constexpr int32_t kFields = variant_options::kWeight | variant_options::kBias;

bool servesKey(const VariantKey& key) {
  return detail::optionsWithin(key, kFields) && key.inner == 0 && !key.hasMore() &&
         LayerNormFamily::guardVariant(layerNormVariantOf(key));
}
double bytesMoved(const VariantKey& key) { return LayerNormFamily::bytesMoved(layerNormVariantOf(key)); }

Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(detail::optionsWithin(key, kFields), "not a layer_norm variant: ", variantString(key));
  const LayerNormVariant v = layerNormVariantOf(key);
  const NormParams p = NormParams::fromJson(params);
  Plan plan = detail::familyPlan<LayerNormFamily>(key, v, p, cubin, device, LayerNormFamily::kName);
  plan.workspaceFloats = LayerNormFamily::workspaceFloats(v, p);
  return plan;
}

const FamilyDescriptor kLayerNorm{LayerNormFamily::kName, "aten::native_layer_norm", LayerNormFamily::kKernelName,
                                  kFields, &servesKey, &bytesMoved, &makePlan};

}  // namespace

LayerNormVariant layerNormVariantOf(const VariantKey& key) {
  return LayerNormVariant{static_cast<DType>(key.dtype), key.rows, key.cols, hasWeight(key), hasBias(key)};
}

const FamilyDescriptor& layerNormDescriptor() { return kLayerNorm; }

}  // namespace hotkernel::kernels
