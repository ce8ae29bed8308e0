// The descriptors of mm_pad_n and addmm_pad_n (Note [Family descriptors]):
// keys are rows = m, cols = n, inner = k, and addmm's the bias option; the
// families' own servesKey, so the inner extent is their k, not a middle-dim
// layout.
#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/MmPadFamily.h"

namespace hotkernel::kernels {
namespace {

// kOptions: 0 for mm_pad_n, the bias option for addmm_pad_n.
template <int32_t kOptions>
bool servesKey(const VariantKey& key) {
  return key.options == kOptions && !key.hasMore() && MmPadFamily::guardVariant(mmPadVariantOf(key));
}
double bytesMoved(const VariantKey& key) { return MmPadFamily::bytesMoved(mmPadVariantOf(key)); }

template <int32_t kOptions>
Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  const char* name = kOptions == 0 ? MmPadFamily::kName : MmPadFamily::kAddmmName;
  HOTKERNEL_CHECK(key.options == kOptions, name, " does not take the variant ", variantString(key));
  return detail::familyPlan<MmPadFamily>(key, mmPadVariantOf(key), MmPadParams::fromJson(params), cubin, device,
                                         name);
}

const FamilyDescriptor kMmPad{MmPadFamily::kName,  "aten::mm",     MmPadFamily::kKernelName, 0,
                              &servesKey<0>,       &bytesMoved,    &makePlan<0>};
const FamilyDescriptor kAddmmPad{MmPadFamily::kAddmmName,           "aten::addmm",
                                 MmPadFamily::kKernelName,          variant_options::kBias,
                                 &servesKey<variant_options::kBias>, &bytesMoved,
                                 &makePlan<variant_options::kBias>};

}  // namespace

MmPadVariant mmPadVariantOf(const VariantKey& key) {
  return MmPadVariant{static_cast<DType>(key.dtype), key.rows, key.cols, key.inner, hasBias(key)};
}

VariantKey mmPadKeyOf(const MmPadVariant& v, int device) {
  VariantKey key;
  key.dtype = static_cast<int32_t>(v.dtype);
  key.device = device;
  key.rows = v.m;
  key.cols = v.n;
  key.inner = v.k;
  key.options = v.bias ? variant_options::kBias : 0;
  return key;
}

const FamilyDescriptor& mmPadDescriptor() { return kMmPad; }
const FamilyDescriptor& addmmPadDescriptor() { return kAddmmPad; }
const FamilyDescriptor& mmPadDescriptorOf(const MmPadVariant& v) { return v.bias ? kAddmmPad : kMmPad; }

}  // namespace hotkernel::kernels
