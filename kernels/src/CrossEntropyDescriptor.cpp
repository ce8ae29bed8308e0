// The descriptor of cross_entropy (Note [Family descriptors]): keys carry the reduction, and nothing else.
#include "FamilyPlan.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/FamilyDescriptor.h"

namespace hotkernel::kernels {
namespace {

constexpr int32_t kFields = variant_options::kReductionMask;

bool isCrossEntropyKey(const VariantKey& key) { return detail::optionsWithin(key, kFields) && reductionOf(key) >= 0; }

bool servesKey(const VariantKey& key) {
  return isCrossEntropyKey(key) && key.inner == 0 && !key.hasMore() &&
         CrossEntropyFamily::guardVariant(crossEntropyVariantOf(key));
}
double bytesMoved(const VariantKey& key) { return CrossEntropyFamily::bytesMoved(crossEntropyVariantOf(key)); }

Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(isCrossEntropyKey(key), "not a cross_entropy_loss key: ", variantString(key));
  return detail::familyPlan<CrossEntropyFamily>(key, crossEntropyVariantOf(key), CrossEntropyParams::fromJson(params),
                                                cubin, device, CrossEntropyFamily::kName);
}

const FamilyDescriptor kCrossEntropy{CrossEntropyFamily::kName, "aten::cross_entropy_loss",
                                     CrossEntropyFamily::kKernelName, kFields, &servesKey, &bytesMoved, &makePlan};

}  // namespace

CrossEntropyVariant crossEntropyVariantOf(const VariantKey& key) {
  return CrossEntropyVariant{static_cast<DType>(key.dtype), key.rows, key.cols,
                             static_cast<CrossEntropyReduction>(reductionOf(key))};
}

const FamilyDescriptor& crossEntropyDescriptor() { return kCrossEntropy; }

}  // namespace hotkernel::kernels
