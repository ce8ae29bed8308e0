// The descriptor of mm_pad_n (Note [Family descriptors]): keys are rows = m,
// cols = n, inner = k, no options; the family's own servesKey, so the inner
// extent is its k, not a middle-dim layout.
#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/MmPadFamily.h"

namespace hotkernel::kernels {
namespace {

bool servesKey(const VariantKey& key) { return key.options == 0 && MmPadFamily::guardVariant(mmPadVariantOf(key)); }
double bytesMoved(const VariantKey& key) { return MmPadFamily::bytesMoved(mmPadVariantOf(key)); }

Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(key.options == 0, "mm_pad_n keys carry no options: ", variantString(key));
  return detail::familyPlan<MmPadFamily>(key, mmPadVariantOf(key), MmPadParams::fromJson(params), cubin, device,
                                         MmPadFamily::kName);
}

const FamilyDescriptor kMmPad{MmPadFamily::kName, "aten::mm", MmPadFamily::kKernelName, 0, &servesKey, &bytesMoved,
                              &makePlan};

}  // namespace

MmPadVariant mmPadVariantOf(const VariantKey& key) {
  return MmPadVariant{static_cast<DType>(key.dtype), key.rows, key.cols, key.inner};
}

VariantKey mmPadKeyOf(const MmPadVariant& v, int device) {
  VariantKey key;
  key.dtype = static_cast<int32_t>(v.dtype);
  key.device = device;
  key.rows = v.m;
  key.cols = v.n;
  key.inner = v.k;
  return key;
}

const FamilyDescriptor& mmPadDescriptor() { return kMmPad; }

}  // namespace hotkernel::kernels
